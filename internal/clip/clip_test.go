package clip_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/throttlekit/throttle/internal/clip"
)

func TestString(t *testing.T) {
	assert.Equal(t, "short", clip.String("short"))
	exact := strings.Repeat("a", clip.Max)
	assert.Equal(t, exact, clip.String(exact), "Max bytes are kept whole")
	long := strings.Repeat("b", 10<<20)
	got := clip.String(long)
	assert.Equal(t, strings.Repeat("b", clip.Max)+"…", got)
}

func TestStringKeepsWholeCharacters(t *testing.T) {
	s := strings.Repeat("é", clip.Max) // 2 bytes each
	got := clip.String(s)
	assert.True(t, utf8.ValidString(got))
	assert.LessOrEqual(t, len(got), clip.Max+len("…"))
	assert.True(t, strings.HasSuffix(got, "…"))
}

func TestQuote(t *testing.T) {
	assert.Equal(t, `"10/x"`, clip.Quote("10/x"))
	got := clip.Quote(strings.Repeat("\x00", 10<<20))
	assert.Less(t, len(got), 5*clip.Max, "a 10 MB value makes a short quote")
	assert.True(t, strings.HasSuffix(got, `"…`))
}

func FuzzString(f *testing.F) {
	f.Add("abc")
	f.Add(strings.Repeat("日本", 40))
	f.Fuzz(func(t *testing.T, s string) {
		got := clip.String(s)
		if len(got) > clip.Max+len("…") {
			t.Fatalf("clip.String kept %d bytes", len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("clip.String broke a character: %q", got)
		}
		if len(s) <= clip.Max && got != s {
			t.Fatalf("short input changed: %q", got)
		}
		_ = clip.Quote(s)
	})
}
