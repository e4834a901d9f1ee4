package headers

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// PeekLimit is the most [PeekBody] reads of a body: error bodies that
// carry signals are a few hundred bytes.
const PeekLimit = 4 << 10

// errReadAfterClose is what a peeked body's Read returns once it is
// closed, as net/http's bodies do.
var errReadAfterClose = errors.New("headers: read on closed response body")

// PeekBody reads the start of a refused response's body, at most
// PeekLimit bytes, for [Classify], and replaces resp.Body with a body that
// reads the whole of the original, peeked bytes included, and whose Close
// closes the original exactly once.
//
// It reads only where signals live: a 403, 413, 429, 503 or 529 whose
// content is JSON (application/json, any +json such as problem+json),
// text/plain or unlabelled, and not content-encoded. Otherwise it returns
// nil and leaves resp.Body alone. The returned bytes belong to the new
// body: read them, do not change them.
//
// The read blocks until PeekLimit bytes, the end of the body or an error
// arrives; an error (the request's context ending, say) ends the peek, and
// the new body returns the bytes read so far and then that error.
func PeekBody(resp *http.Response) []byte {
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength == 0 ||
		!peekable(resp.StatusCode, resp.Header) {
		return nil
	}
	size := int64(PeekLimit)
	if resp.ContentLength > 0 {
		size = min(size, resp.ContentLength)
	}
	buf := make([]byte, size)
	// Not io.ReadFull: the new body must end with the original's own
	// error, and ReadFull turns an early io.EOF into io.ErrUnexpectedEOF.
	n, empty := 0, 0
	var err error
	for n < len(buf) && err == nil {
		var m int
		m, err = resp.Body.Read(buf[n:])
		n += m
		if m > 0 {
			empty = 0
		} else if empty++; empty == 100 && err == nil {
			err = io.ErrNoProgress // as bufio says of such a reader
		}
	}
	buf = buf[:n]
	resp.Body = &peekedBody{rest: buf, err: err, rc: resp.Body}
	return buf
}

// peekable reports whether a response with this status and header may
// carry a signal in its body.
func peekable(status int, h http.Header) bool {
	switch status {
	case http.StatusForbidden, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests,
		http.StatusServiceUnavailable, 529:
	default:
		return false
	}
	if enc := trim(get(h, "Content-Encoding")); enc != "" && !equalFold(enc, "identity") {
		return false
	}
	ct, _, _ := strings.Cut(get(h, "Content-Type"), ";")
	ct = trim(ct)
	return ct == "" || equalFold(ct, "application/json") || equalFold(ct, "text/plain") ||
		(len(ct) > 5 && equalFold(ct[len(ct)-5:], "+json"))
}

// peekedBody replays the peeked bytes, then reads on from the original.
type peekedBody struct {
	rest   []byte // the peeked bytes not yet read
	err    error  // what ended the peek: nil (more to read), io.EOF or a failure
	rc     io.ReadCloser
	closed atomic.Bool
}

func (b *peekedBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errReadAfterClose
	}
	if len(b.rest) > 0 {
		n := copy(p, b.rest)
		b.rest = b.rest[n:]
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.rc.Read(p)
}

// Close closes the original body the first time; later calls return nil.
func (b *peekedBody) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.rc.Close()
}
