package throttle

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/internal/streamhook"
)

// A response's status and header are not always its last word. An LLM
// API streaming its answer as server-sent events may, after its 200,
// report that it is overloaded or rate limited in an event of the stream
// (Anthropic sends `event: error` with an overloaded_error; OpenAI an
// error object); a gRPC stream's status arrives when the stream ends.
// watch makes the partition learn those words when they come, as it
// would from a response that said them in its status and header.

// watch wraps resp.Body, if it may carry a late answer, so that g learns
// the answer when it comes. g is the gate that let the request through
// with ticket tk.
func (t *Transport) watch(g *gate, tk *ticket, resp *http.Response) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	pause := tk.pause
	if l, ok := resp.Body.(streamhook.Late); ok {
		var first atomic.Bool // of the first wave, until its first answer comes
		first.Store(tk.late && tk.seen == 0)
		l.Listen(func(status int, h http.Header) {
			if first.Swap(false) {
				g.leaveWave()
			}
			learnLate(g, pause, status, h, nil)
		})
		return
	}
	// The map read, not Header.Get: every response passes here, and
	// net/http's header keys are canonical already.
	if ct := resp.Header["Content-Type"]; len(ct) > 0 && isEventStream(ct[0]) {
		resp.Body = &sseBody{rc: resp.Body, g: g, pause: pause}
	}
}

// learnLate makes g learn a late answer with this status, header (nil
// for none) and body (what Classify reads: an error object, or nil), as
// from a response to a request sent before the answers it learned since,
// after pause pauses had begun: if one has begun since, the answer
// pauses but teaches no pace, as an answer that came back late would.
func learnLate(g *gate, pause int64, status int, h http.Header, body []byte) {
	if h == nil {
		h = http.Header{}
	}
	now := time.Now()
	var a answer
	a.read(&http.Response{StatusCode: status, Header: h}, body, now)
	if status >= 400 || len(a.info.Quotas) > 0 || a.info.HasRetryAfter {
		g.mark(heard)
	}
	g.observe(&a, pause, now)
	a.free()
}

// isEventStream reports whether a Content-Type is text/event-stream,
// with or without parameters, in any case.
func isEventStream(ct string) bool {
	const mt = "text/event-stream"
	if len(ct) < len(mt) || !strings.EqualFold(ct[:len(mt)], mt) {
		return false
	}
	rest := strings.TrimLeft(ct[len(mt):], " \t")
	return rest == "" || rest[0] == ';'
}

// sseBody passes a text/event-stream body through unchanged and reads its
// events on the way: the first that reports an overload or a rate limit
// is learned by g, as a 529 or a 429 with that event's data as its body.
type sseBody struct {
	rc    io.ReadCloser
	g     *gate
	pause int64 // the request's ticket's (learnLate)
	scan  sseScanner
	done  atomic.Bool // a signal was learned: read no further
}

func (b *sseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 && !b.done.Load() {
		if status, data := b.scan.feed(p[:n]); status != 0 {
			b.done.Store(true)
			learnLate(b.g, b.pause, status, nil, data)
		}
	}
	return n, err
}

func (b *sseBody) Close() error { return b.rc.Close() }

// maxSSEField bounds what the scanner keeps of one line and of one
// event's data: an error event is a few hundred bytes; longer lines (a
// model's output) are skipped, not kept.
const maxSSEField = 16 << 10

// sseScanner reads server-sent events (the WHATWG "event stream"
// format: lines ended by CRLF, LF or CR; "field: value"; a blank line
// ends an event; a line starting with ':' is a comment) fed to it in
// pieces of any size, and reports the first event that says the server is
// overloaded or rate limited.
type sseScanner struct {
	line  []byte // the current line, while it fits maxSSEField
	long  bool   // the current line outgrew maxSSEField: it is skipped
	cr    bool   // the last byte fed was a CR: a LF right after it ends nothing
	event []byte // the current event's type
	data  []byte // the current event's data
	over  bool   // the current event's data outgrew maxSSEField
}

// feed scans p. It returns the status the first signalling event
// completed in p stands for (529 overloaded, 429 rate limited) and that
// event's data, or 0 and nil.
func (s *sseScanner) feed(p []byte) (status int, data []byte) {
	for len(p) > 0 {
		if s.cr && p[0] == '\n' {
			p = p[1:]
			s.cr = false
			continue
		}
		s.cr = false
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			s.add(p)
			return 0, nil
		}
		s.add(p[:i])
		s.cr = p[i] == '\r'
		p = p[i+1:]
		if st, d := s.endLine(); st != 0 {
			return st, d
		}
	}
	return 0, nil
}

func (s *sseScanner) add(p []byte) {
	if s.long {
		return
	}
	if len(s.line)+len(p) > maxSSEField {
		s.long, s.line = true, s.line[:0]
		return
	}
	s.line = append(s.line, p...)
}

// endLine processes the line just ended.
func (s *sseScanner) endLine() (status int, data []byte) {
	line, long := s.line, s.long
	s.line, s.long = s.line[:0], false
	if long {
		return 0, nil
	}
	if len(line) == 0 {
		status, data = s.dispatch()
		s.event, s.data, s.over = s.event[:0], s.data[:0], false
		return status, data
	}
	if line[0] == ':' {
		return 0, nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		s.event = append(s.event[:0], value...)
	case "data":
		if s.over || len(s.data)+len(value)+1 > maxSSEField {
			s.over = true
			return 0, nil
		}
		if len(s.data) > 0 {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
	}
	return 0, nil
}

// sseError is the union of the error events LLM APIs stream: Anthropic's
// {"type":"error","error":{"type":"overloaded_error",...}}, OpenAI's chat
// completions {"error":{"code":...,"type":...}} and its Responses API's
// {"type":"error","code":"server_is_overloaded",...}.
type sseError struct {
	Type  string `json:"type"`
	Code  any    `json:"code"`
	Error *struct {
		Type string `json:"type"`
		Code any    `json:"code"`
	} `json:"error"`
}

// dispatch reports what the event just ended says.
func (s *sseScanner) dispatch() (status int, data []byte) {
	if s.over || len(s.data) == 0 {
		return 0, nil
	}
	if string(s.event) != "error" && !bytes.Contains(s.data, []byte(`"error"`)) {
		return 0, nil // the common case: an ordinary event, not decoded
	}
	var e sseError
	if json.Unmarshal(s.data, &e) != nil {
		return 0, nil
	}
	codes := []any{e.Code}
	if e.Error != nil {
		codes = append(codes, e.Error.Type, e.Error.Code)
	}
	for _, c := range codes {
		switch c {
		case "overloaded_error", "server_is_overloaded", "server_overloaded":
			return 529, bytes.Clone(s.data)
		case "rate_limit_error", "rate_limit_exceeded":
			return http.StatusTooManyRequests, bytes.Clone(s.data)
		}
	}
	return 0, nil
}
