package headers

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// body is a response body that hands out data at most chunk bytes a Read,
// then ends with err (io.EOF when nil), and counts its Close calls.
type body struct {
	data   []byte
	chunk  int
	err    error
	closes int
	reads  int
}

func (b *body) Read(p []byte) (int, error) {
	b.reads++
	if len(b.data) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		return 0, io.EOF
	}
	n := min(len(p), b.chunk, len(b.data))
	copy(p, b.data[:n])
	b.data = b.data[n:]
	return n, nil
}

func (b *body) Close() error { b.closes++; return nil }

func response(status int, ct string, rc io.ReadCloser) *http.Response {
	h := http.Header{}
	if ct != "" {
		h.Set("Content-Type", ct)
	}
	return &http.Response{StatusCode: status, Header: h, Body: rc, ContentLength: -1}
}

func TestPeekBody(t *testing.T) {
	short := `{"error":{"type":"insufficient_quota"}}`
	long := `{"message":"` + strings.Repeat("x", 3*PeekLimit) + `"}`
	for _, tc := range []struct {
		name  string
		data  string
		chunk int
	}{
		{"short, one read", short, 1 << 20},
		{"short, byte by byte", short, 1},
		{"longer than the peek", long, 1000},
		{"exactly the peek", strings.Repeat("y", PeekLimit), 7},
		{"empty", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := &body{data: []byte(tc.data), chunk: tc.chunk}
			resp := response(http.StatusTooManyRequests, "application/json", orig)
			got := PeekBody(resp)
			want := tc.data[:min(len(tc.data), PeekLimit)]
			assert.Equal(t, want, string(got))
			all, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.data, string(all), "the body reads in full")
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, 1, orig.closes)
		})
	}
}

func TestPeekBodyKnownLength(t *testing.T) {
	data := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	orig := &body{data: []byte(data), chunk: 5}
	resp := response(529, "application/json", orig)
	resp.ContentLength = int64(len(data))
	got := PeekBody(resp)
	assert.Equal(t, data, string(got))
	assert.Equal(t, len(data), cap(got), "a known length sizes the buffer")
	all, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, data, string(all))
}

func TestPeekBodyLeavesOthersAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ct     string
		enc    string
		length int64
	}{
		{"success", 200, "application/json", "", -1},
		{"not found", 404, "application/json", "", -1},
		{"a 500", 500, "application/json", "", -1},
		{"HTML", 429, "text/html; charset=utf-8", "", -1},
		{"an image", 503, "image/png", "", -1},
		{"gzip", 429, "application/json", "gzip", -1},
		{"empty", 429, "application/json", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := &body{data: []byte("{}"), chunk: 10}
			resp := response(tc.status, tc.ct, orig)
			resp.ContentLength = tc.length
			if tc.enc != "" {
				resp.Header.Set("Content-Encoding", tc.enc)
			}
			assert.Nil(t, PeekBody(resp))
			assert.Same(t, orig, resp.Body)
			assert.Zero(t, orig.reads, "nothing read")
		})
	}
	assert.Nil(t, PeekBody(nil))
	resp := response(429, "", http.NoBody)
	assert.Nil(t, PeekBody(resp))
	assert.Equal(t, http.NoBody, resp.Body)
	resp = response(429, "", nil)
	assert.Nil(t, PeekBody(resp))
	assert.Nil(t, resp.Body)
}

func TestPeekBodyContentTypes(t *testing.T) {
	for _, ct := range []string{
		"", "application/json", "Application/JSON; charset=utf-8",
		"application/problem+json", "application/vnd.api+json", "text/plain; charset=utf-8",
	} {
		for _, status := range []int{403, 413, 429, 503, 529} {
			resp := response(status, ct, io.NopCloser(strings.NewReader("{}")))
			assert.Equal(t, "{}", string(PeekBody(resp)), "%d %q", status, ct)
		}
	}
	// Content-Encoding: identity is no encoding.
	resp := response(429, "application/json", io.NopCloser(strings.NewReader("{}")))
	resp.Header.Set("Content-Encoding", "identity")
	assert.Equal(t, "{}", string(PeekBody(resp)))
}

func TestPeekBodyReadError(t *testing.T) {
	boom := errors.New("connection reset")
	orig := &body{data: []byte("partial"), chunk: 3, err: boom}
	resp := response(429, "application/json", orig)
	assert.Equal(t, "partial", string(PeekBody(resp)))
	all, err := io.ReadAll(resp.Body)
	assert.Equal(t, "partial", string(all))
	assert.ErrorIs(t, err, boom, "the original's error, after the bytes read before it")
	_, err = resp.Body.Read(make([]byte, 1))
	assert.ErrorIs(t, err, boom, "and again")

	// An early end keeps its own error: a truncated body says so.
	orig = &body{data: []byte("cut"), chunk: 10, err: io.ErrUnexpectedEOF}
	resp = response(429, "", orig)
	PeekBody(resp)
	all, err = io.ReadAll(resp.Body)
	assert.Equal(t, "cut", string(all))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// stuck never makes progress.
type stuck struct{ io.Closer }

func (stuck) Read([]byte) (int, error) { return 0, nil }

func TestPeekBodyNoProgress(t *testing.T) {
	resp := response(429, "", stuck{io.NopCloser(nil)})
	assert.Empty(t, PeekBody(resp))
	_, err := resp.Body.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.ErrNoProgress)
}

func TestPeekBodyClose(t *testing.T) {
	t.Run("closes the original once", func(t *testing.T) {
		orig := &body{data: []byte(strings.Repeat("z", 2*PeekLimit)), chunk: 512}
		resp := response(429, "", orig)
		PeekBody(resp)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, 1, orig.closes)
	})
	t.Run("reads fail after Close, even of peeked bytes", func(t *testing.T) {
		orig := &body{data: []byte("peeked"), chunk: 512}
		resp := response(429, "", orig)
		PeekBody(resp)
		require.NoError(t, resp.Body.Close())
		n, err := resp.Body.Read(make([]byte, 10))
		assert.Zero(t, n)
		assert.ErrorIs(t, err, errReadAfterClose)
		assert.Equal(t, 1, orig.closes)
	})
	t.Run("the original's Close error", func(t *testing.T) {
		boom := errors.New("close failed")
		resp := response(429, "", errCloser{strings.NewReader("x"), boom})
		PeekBody(resp)
		assert.ErrorIs(t, resp.Body.Close(), boom)
		assert.NoError(t, resp.Body.Close(), "only the first Close reaches the original")
	})
}

type errCloser struct {
	io.Reader
	err error
}

func (c errCloser) Close() error { return c.err }

// TestPeekThenClassify is the pair as a Transport uses it.
func TestPeekThenClassify(t *testing.T) {
	data := `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	resp := response(429, "application/json", io.NopCloser(bytes.NewReader([]byte(data))))
	c := Classify(resp.StatusCode, resp.Header, PeekBody(resp))
	assert.Equal(t, QuotaExhausted, c.Signal)
	assert.True(t, c.Signal.Final())
	all, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, data, string(all))
}
