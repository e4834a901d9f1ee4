package throttle_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/server"
)

// docFiles are the documents whose Go snippets must compile, and
// snippetFiles the Go files, compiled by go test (the second in the
// metrics module, which has the Prometheus client, the third in
// grpcthrottle, which has grpc), that hold them.
var (
	docFiles     = []string{"README.md", "docs/recipes.md"}
	snippetFiles = []string{"readme_snippets_test.go", "metrics/throttleprom/readme_snippets_test.go", "grpcthrottle/readme_snippets_test.go"}
)

// fences finds a document's fenced blocks of one language.
func fences(doc, lang string) []string {
	re := regexp.MustCompile("(?ms)^```" + lang + "\n(.*?)^```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

// codeLines are the non-empty lines of s with their runs of blanks made
// one space (gofmt aligns comments; the documents need not).
func codeLines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// withoutImports splits a snippet into its import paths and the rest.
func withoutImports(lines []string) (imports, rest []string) {
	in := false
	for _, l := range lines {
		switch {
		case l == "import (":
			in = true
		case in && l == ")":
			in = false
		case in:
			imports = append(imports, l)
		default:
			rest = append(rest, l)
		}
	}
	return imports, rest
}

// contains reports whether want appears in have as consecutive lines.
func contains(have, want []string) bool {
	for i := 0; i+len(want) <= len(have); i++ {
		if slices.Equal(have[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// TestDocSnippets: every Go snippet of the README and the recipes is, line
// for line, in a Go file the compiler checks (with its imports), so a
// snippet that no longer compiles fails the build; and every policy the
// recipes show parses.
func TestDocSnippets(t *testing.T) {
	var have []string
	for _, f := range snippetFiles {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		have = append(have, codeLines(string(b))...)
	}
	n := 0
	for _, f := range docFiles {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, s := range fences(string(b), "go") {
			n++
			imports, body := withoutImports(codeLines(s))
			assert.True(t, contains(have, body), "%s: Go snippet %d is not in %v, verbatim:\n%s", f, i+1, snippetFiles, s)
			for _, imp := range imports {
				assert.Contains(t, have, imp, "%s: Go snippet %d imports %s", f, i+1, imp)
			}
		}
		for i, y := range fences(string(b), "yaml") {
			p, err := server.ParsePolicy([]byte(y), "yaml")
			if assert.NoError(t, err, "%s: YAML block %d", f, i+1) {
				p.Close()
			}
		}
	}
	assert.GreaterOrEqual(t, n, 13, "the README's and the recipes' Go snippets")
}

// TestREADMEGoVersion: the Go version the README asks for is go.mod's.
func TestREADMEGoVersion(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	require.NotNil(t, m)
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	got := regexp.MustCompile(`\(Go (\d+\.\d+)\+`).FindAllSubmatch(readme, -1)
	require.NotEmpty(t, got, "the README says which Go it needs")
	for _, g := range got {
		assert.Equal(t, string(m[1]), string(g[1]), "README's Go version against go.mod's")
	}
}

// packageDocs are the files holding each package's documentation, and a
// name of what most callers call, which its first screen must show.
var packageDocs = []struct{ file, call string }{
	{"doc.go", "NewTransport"},
	{"limiters/doc.go", "NewTokenBucket"},
	{"headers/doc.go", "headers.Parse("},
	{"keyextract/doc.go", "[Host]"},
	{"repository/doc.go", "repository.NewMemory("},
	{"repository/redisrepo/doc.go", "redisrepo.New("},
	{"repository/ratelimitd/doc.go", "ratelimitd.New("},
	{"server/doc.go", "server.New("},
	{"feedbackstore/feedbackstore.go", "throttle.WithFeedbackStore"},
	{"metrics/throttleprom/metrics.go", "throttleprom.New("},
}

// figure matches a benchmark figure: a speed, a size, a ratio to an ideal.
var figure = regexp.MustCompile(`\d ?(ns/op|B/op|allocs/op|MB\b|KB\b|µs\b)|\d×|decisions/s`)

// TestPackageDocs: each package's documentation says on its first screen
// (its first 30 lines) what to call, and carries no benchmark figures
// (they live in bench/README.md).
func TestPackageDocs(t *testing.T) {
	for _, p := range packageDocs {
		b, err := os.ReadFile(p.file)
		require.NoError(t, err)
		var doc []string
		for l := range strings.SplitSeq(string(b), "\n") {
			if !strings.HasPrefix(l, "//") {
				if len(doc) > 0 && strings.HasPrefix(l, "package ") {
					break
				}
				if len(doc) > 0 && !strings.HasPrefix(l, "//") {
					doc = nil // a comment that was not the package's
				}
				continue
			}
			doc = append(doc, l)
		}
		require.NotEmpty(t, doc, "%s: no package documentation", p.file)
		first := strings.Join(doc[:min(30, len(doc))], "\n")
		assert.Contains(t, first, p.call, "%s: the first screen does not say what to call", p.file)
		assert.Empty(t, figure.FindAllString(strings.Join(doc, "\n"), -1), "%s: benchmark figures belong in bench/README.md", p.file)
	}
}
