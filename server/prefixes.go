package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/gaissmai/bart"

	"github.com/throttlekit/throttle/internal/clip"
)

// A PrefixSource adds IP prefixes to a policy's allow or block list, one
// call of add each (see WithAllowList): the way to load lists too long for
// a policy file, from a file (PrefixFile), a database or a feed. It is
// called each time a policy is built with it, so a service that reloads its
// policy reloads the lists too. An error fails the build.
type PrefixSource func(add func(netip.Prefix)) error

// WithAllowList adds src's prefixes to the policy's Allow list (the
// config's Allow and AllowFile stay in it too). It may be given several
// times.
func WithAllowList(src PrefixSource) PolicyOption {
	return func(p *Policy) { p.allowSrc = append(p.allowSrc, src) }
}

// WithBlockList adds src's prefixes to the policy's Block list (the
// config's Block and BlockFile stay in it too). It may be given several
// times.
func WithBlockList(src PrefixSource) PolicyOption {
	return func(p *Policy) { p.blockSrc = append(p.blockSrc, src) }
}

// WithPolicyDir sets the directory that relative AllowFile and BlockFile
// paths start from; the default is the working directory, except for
// LoadPolicy, whose default is the policy file's directory.
func WithPolicyDir(dir string) PolicyOption { return func(p *Policy) { p.dir = dir } }

// PrefixFile is a PrefixSource reading the file at path, in ReadPrefixes'
// format, each time the policy is built.
func PrefixFile(path string) PrefixSource {
	return func(add func(netip.Prefix)) error {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("server: prefix list: %w", err)
		}
		defer f.Close()
		if err := ReadPrefixes(f, add); err != nil {
			var le *PrefixListError
			if errors.As(err, &le) {
				le.File = path
			}
			return err
		}
		return nil
	}
}

// maxPrefixLine bounds a line of a prefix list: the longest IPv6 prefix
// with a zone, a comment and blanks fits many times over.
const maxPrefixLine = 4096

// PrefixListError reports a line of a prefix list that is not an IP
// address or CIDR prefix.
type PrefixListError struct {
	File string // empty when read by ReadPrefixes from a reader
	Line int    // 1-based
	Err  error
}

func (e *PrefixListError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("server: prefix list: line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("server: prefix list %s:%d: %v", e.File, e.Line, e.Err)
}

func (e *PrefixListError) Unwrap() error { return e.Err }

// ReadPrefixes reads a prefix list from r and calls add with each entry:
// one IP address or CIDR prefix a line ("203.0.113.7", "10.0.0.0/8",
// "2001:db8::/32"); blanks around it, empty lines and everything from a
// '#' on are ignored. A line that is anything else, or longer than 4 KiB,
// stops the reading with a *PrefixListError naming it; what was added
// before stays added.
func ReadPrefixes(r io.Reader, add func(netip.Prefix)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxPrefixLine)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if i := bytes.IndexByte(b, '#'); i >= 0 {
			b = b[:i]
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		pf, err := parsePrefix(string(b))
		if err != nil {
			return &PrefixListError{Line: line, Err: err}
		}
		add(pf)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &PrefixListError{Line: line + 1, Err: fmt.Errorf("a line longer than %d bytes", maxPrefixLine)}
		}
		return fmt.Errorf("server: prefix list: %w", err)
	}
	return nil
}

// parsePrefix reads an IP address or a CIDR prefix, as a masked prefix;
// an IPv4-mapped IPv6 prefix is its IPv4 prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	var pf netip.Prefix
	var err error
	if strings.Contains(s, "/") {
		pf, err = netip.ParsePrefix(s)
	} else {
		var a netip.Addr
		a, err = netip.ParseAddr(s)
		pf = netip.PrefixFrom(a, a.BitLen())
	}
	if err != nil || !pf.IsValid() {
		return netip.Prefix{}, fmt.Errorf("want an IP address or CIDR prefix, got %s", clip.Quote(s))
	}
	pf = pf.Masked()
	if a := pf.Addr(); a.Is4In6() && pf.Bits() >= 96 {
		pf = netip.PrefixFrom(a.Unmap(), pf.Bits()-96)
	}
	return pf, nil
}

// prefixTable is an allow or block list: a prefix table
// (github.com/gaissmai/bart's Lite, a multibit trie), so a decision costs
// a few memory reads however long the list is. The zero value is empty.
type prefixTable struct{ t *bart.Lite }

func (pt *prefixTable) add(pf netip.Prefix) {
	if pt.t == nil {
		pt.t = new(bart.Lite)
	}
	pt.t.Insert(pf)
}

func (pt *prefixTable) empty() bool { return pt.t == nil }

// holds reports whether one prefix of the table holds all of client.
func (pt *prefixTable) holds(client netip.Prefix) bool {
	return pt.t != nil && pt.t.LookupPrefix(client)
}

// overlaps reports whether a prefix of the table holds any of client.
func (pt *prefixTable) overlaps(client netip.Prefix) bool {
	return pt.t != nil && pt.t.OverlapsPrefix(client)
}

// buildList makes the table of a list: the config's entries (field, for
// errors), its file (fileField) and the sources.
func (p *Policy) buildList(field string, list []string, fileField, file string, srcs []PrefixSource) (prefixTable, error) {
	var pt prefixTable
	for i, s := range list {
		pf, err := parsePrefix(strings.TrimSpace(s))
		if err != nil {
			return pt, pathError([]seg{name(field), at(i)}, err)
		}
		pt.add(pf)
	}
	if file != "" {
		if !filepath.IsAbs(file) && p.dir != "" {
			file = filepath.Join(p.dir, file)
		}
		if err := PrefixFile(file)(pt.add); err != nil {
			return pt, pathError([]seg{name(fileField)}, err)
		}
	}
	for _, src := range srcs {
		if err := src(pt.add); err != nil {
			return pt, pathError([]seg{name(field)}, err)
		}
	}
	return pt, nil
}
