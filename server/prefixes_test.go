package server_test

import (
	"errors"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/server"
)

// TestListFiles: block_file and allow_file, relative to the policy file,
// are read each time the policy is loaded, so a reload takes their new
// contents; WithBlockList adds a list of the caller's.
func TestListFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600))
	}
	write("policy.yaml", `plans: {only: {}}
block: ["203.0.113.7"]
block_file: lists/block.txt
allow_file: allow.txt
`)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "lists"), 0o700))
	write("lists/block.txt", "# blocked\n198.51.100.0/24  # a whole net\n\n  2001:db8:bad::/48\n")
	write("allow.txt", "10.0.0.0/8\n")
	decide := func(p *server.Policy, addr string) int {
		h := server.New(nil, server.WithPolicy(p)).Middleware(ok)
		return do(h, "GET", "/", addr).Code
	}
	p, err := server.LoadPolicy(filepath.Join(dir, "policy.yaml"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, decide(p, "198.51.100.9:1"))
	assert.Equal(t, http.StatusForbidden, decide(p, "[2001:db8:bad:1::1]:1"))
	assert.Equal(t, http.StatusForbidden, decide(p, "203.0.113.7:1"), "the inline list still counts")
	assert.Equal(t, http.StatusOK, decide(p, "192.0.2.1:1"))
	p.Close()

	write("lists/block.txt", "192.0.2.0/24\n")
	p, err = server.LoadPolicy(filepath.Join(dir, "policy.yaml"),
		server.WithBlockList(func(add func(netip.Prefix)) error {
			add(netip.MustParsePrefix("100.64.0.0/10"))
			return nil
		}))
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, http.StatusOK, decide(p, "198.51.100.9:1"), "reloaded: the file's new contents")
	assert.Equal(t, http.StatusForbidden, decide(p, "192.0.2.1:1"))
	assert.Equal(t, http.StatusForbidden, decide(p, "100.64.1.1:1"), "WithBlockList's list")
}

func TestListErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "block.txt")
	require.NoError(t, os.WriteFile(path, []byte("10.0.0.0/8\n\nnot-an-ip\n"), 0o600))
	cfg := server.PolicyConfig{Plans: map[string]server.Plan{"only": {}}, BlockFile: path}
	_, err := server.NewPolicy(cfg)
	var pe *server.PolicyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "block_file", pe.Path)
	var le *server.PrefixListError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, path, le.File)
	assert.Equal(t, 3, le.Line)
	assert.Contains(t, err.Error(), "block.txt:3")

	cfg.BlockFile = filepath.Join(dir, "missing.txt")
	_, err = server.NewPolicy(cfg)
	require.ErrorIs(t, err, os.ErrNotExist)

	boom := errors.New("feed down")
	_, err = server.NewPolicy(server.PolicyConfig{Plans: map[string]server.Plan{"only": {}}},
		server.WithAllowList(func(func(netip.Prefix)) error { return boom }))
	require.ErrorIs(t, err, boom)

	err = server.ReadPrefixes(strings.NewReader(strings.Repeat("1", 5000)+"\n"), func(netip.Prefix) {})
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 1, le.Line)
}

// FuzzReadPrefixes: any bytes give prefixes or a *PrefixListError, never a
// panic; every prefix given is valid and masked, IPv4 unmapped.
func FuzzReadPrefixes(f *testing.F) {
	f.Add([]byte("10.0.0.0/8\n# comment\n2001:db8::/32 # net\n203.0.113.7\n::ffff:192.0.2.0/120\n"))
	f.Add([]byte("10.0.0.1/33\n"))
	f.Add([]byte("fe80::1%eth0\n"))
	f.Add([]byte("\x00\xff/\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := server.ReadPrefixes(strings.NewReader(string(data)), func(pf netip.Prefix) {
			if !pf.IsValid() || pf != pf.Masked() || pf.Addr().Is4In6() {
				t.Fatalf("bad prefix %v from %q", pf, data)
			}
		})
		var le *server.PrefixListError
		if err != nil && !errors.As(err, &le) {
			t.Fatalf("%T %v", err, err)
		}
	})
}
