package server

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// LoadPolicy reads a policy file, JSON if its name ends in ".json" and YAML
// otherwise, and compiles it with NewPolicy. A malformed file is a
// *PolicyError naming the file, line, column and field; nothing of it is
// used.
//
// The file holds a PolicyConfig; every limit is a limiters.Spec, with rates
// written "10/s" (also /m, /h, /d, "100/30s") and durations "1m":
//
//	default_plan: free
//	allow: ["10.0.0.0/8"]        # bypass every limit
//	block: ["203.0.113.7"]       # 403
//	max_keys: 1000000
//	plans:
//	  free:
//	    default:                 # every endpoint not listed below
//	      limits:
//	        - {algorithm: gcra, rate: 60/m, limit: 10}
//	    endpoints:
//	      "POST /api/ask":
//	        action: delay        # block (default), delay or shadow
//	        max_delay: 2s
//	        limits:
//	          - {algorithm: sliding_window, limit: 10, window: 1m}
//	          - {algorithm: fixed_window, limit: 1000, window: 24h}
//	          - {algorithm: concurrency, limit: 5}
//	        cost_caps:
//	          - {algorithm: fixed_window, limit: 100000, window: 1h}
//	  pro:
//	    default:
//	      limits:
//	        - {algorithm: token_bucket, rate: 100/s, limit: 200}
//
// Unknown fields are errors, as are numbers where durations belong (60 is
// not a minute) and rules that fail limiters.Spec.Validate.
func LoadPolicy(path string, opts ...PolicyOption) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: policy: %w", err)
	}
	var cfg PolicyConfig
	if strings.EqualFold(filepath.Ext(path), ".json") {
		cfg, err = decodeJSON(data)
	} else {
		cfg, err = decodeYAML(data)
	}
	if err == nil {
		var p *Policy
		if p, err = NewPolicy(cfg, opts...); err == nil {
			return p, nil
		}
		err = locate(data, err)
	}
	if pe, ok := err.(*PolicyError); ok {
		pe.File = path
	}
	return nil, err
}

// ParsePolicyYAML compiles a policy from YAML; see LoadPolicy.
func ParsePolicyYAML(data []byte, opts ...PolicyOption) (*Policy, error) {
	cfg, err := decodeYAML(data)
	if err != nil {
		return nil, err
	}
	p, err := NewPolicy(cfg, opts...)
	if err != nil {
		return nil, locate(data, err)
	}
	return p, nil
}

// ParsePolicyJSON compiles a policy from JSON; see LoadPolicy.
func ParsePolicyJSON(data []byte, opts ...PolicyOption) (*Policy, error) {
	cfg, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	p, err := NewPolicy(cfg, opts...)
	if err != nil {
		return nil, locate(data, err)
	}
	return p, nil
}

// DecodePolicyConfig reads a PolicyConfig from JSON (format "json") or YAML
// ("yaml"), checking it as LoadPolicy does except for NewPolicy's checks.
func DecodePolicyConfig(data []byte, format string) (PolicyConfig, error) {
	switch strings.ToLower(format) {
	case "json":
		return decodeJSON(data)
	case "yaml", "yml":
		return decodeYAML(data)
	}
	return PolicyConfig{}, fmt.Errorf("server: policy: unknown format %q; want json or yaml", format)
}

// decodeJSON checks that data is strict JSON (with the line and column of a
// syntax error) and then decodes it as YAML, of which JSON is a subset, so
// that both formats share one decoder, one set of checks and positions.
func decodeJSON(data []byte) (PolicyConfig, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil && dec.More() {
		err = errors.New("data after the top-level value")
	}
	if err != nil {
		off := dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset - 1 // the offending byte
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("empty or truncated JSON")
		}
		line, col := lineCol(data, off)
		return PolicyConfig{}, &PolicyError{Line: line, Column: col, Err: err}
	}
	if _, ok := v.(map[string]any); !ok {
		return PolicyConfig{}, &PolicyError{Line: 1, Column: 1, Err: errors.New("want a JSON object")}
	}
	return decodeYAML(data)
}

// lineCol converts a byte offset into a 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

func decodeYAML(data []byte) (PolicyConfig, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return PolicyConfig{}, yamlError(err)
	}
	if len(root.Content) == 0 {
		return PolicyConfig{}, &PolicyError{Line: 1, Column: 1, Err: errors.New("empty policy")}
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return PolicyConfig{}, &PolicyError{Line: doc.Line, Column: doc.Column, Err: errors.New("want a mapping of policy fields")}
	}
	if err := check(doc, reflect.TypeFor[PolicyConfig](), nil); err != nil {
		return PolicyConfig{}, err
	}
	var cfg PolicyConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return PolicyConfig{}, yamlError(err) // check should have caught it
	}
	return cfg, nil
}

// yamlError turns yaml.v3's "yaml: line 3: ..." into a *PolicyError.
func yamlError(err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	pe := &PolicyError{}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ":"); ok {
			if n, err := strconv.Atoi(num); err == nil {
				pe.Line, msg = n, strings.TrimSpace(tail)
			}
		}
	}
	pe.Err = errors.New(msg)
	return pe
}

var (
	durationType        = reflect.TypeFor[time.Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// check walks a YAML node against the Go type it will decode into, and
// reports the first mismatch with its field path and position: unknown
// fields, numbers for durations, malformed rates, wrong kinds of values.
func check(n *yaml.Node, t reflect.Type, path []string) error {
	fail := func(format string, args ...any) error {
		return &PolicyError{Line: n.Line, Column: n.Column, Path: joinPath(path), Err: fmt.Errorf(format, args...)}
	}
	if n.Kind == yaml.AliasNode {
		return check(n.Alias, t, path)
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return fail("want a duration string such as \"1m\" or \"2s\", got %s", describe(n))
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			return fail("want a duration such as \"1m\" or \"2s\", got %q", n.Value)
		}
		return nil
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		if n.Kind != yaml.ScalarNode {
			return fail("want a string, got %s", describe(n))
		}
		v := reflect.New(t).Interface().(encoding.TextUnmarshaler)
		if err := v.UnmarshalText([]byte(n.Value)); err != nil {
			return fail("%v", err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping, got %s", describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fieldByTag(t, k.Value)
			if !ok {
				return &PolicyError{Line: k.Line, Column: k.Column, Path: joinPath(path), Err: fmt.Errorf("unknown field %q; want one of %s", k.Value, strings.Join(fieldNames(t), ", "))}
			}
			if err := check(v, f.Type, append(slices.Clip(path), k.Value)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping, got %s", describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fail("want string keys")
			}
			if err := check(v, t.Elem(), append(slices.Clip(path), keySeg(k.Value))); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fail("want a list, got %s", describe(n))
		}
		for i, v := range n.Content {
			if err := check(v, t.Elem(), append(slices.Clip(path), idxSeg(i))); err != nil {
				return err
			}
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return fail("want a string, got %s", describe(n))
		}
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return fail("want an integer, got %s", describe(n))
		}
		if _, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, strconv.IntSize); err != nil {
			return fail("want an integer, got %s", n.Value)
		}
	}
	return nil
}

// describe names what a node holds, for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	}
	return strconv.Quote(n.Value)
}

// fieldByTag finds t's field whose yaml tag is name.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag == name && tag != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			names = append(names, tag)
		}
	}
	return names
}

// locate adds the file position of a NewPolicy error's path, found by
// walking the document's nodes.
func locate(data []byte, err error) error {
	pe, ok := err.(*PolicyError)
	if !ok || pe.Line > 0 {
		return err
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return err
	}
	n := root.Content[0]
	for _, seg := range splitPath(pe.Path) {
		next := child(n, seg)
		if next == nil {
			break
		}
		n = next
	}
	pe.Line, pe.Column = n.Line, n.Column
	return pe
}

// splitPath undoes joinPath.
func splitPath(p string) []string {
	var segs []string
	for p != "" {
		switch {
		case p[0] == '.':
			p = p[1:]
		case p[0] == '[':
			end := 1
			if len(p) > 1 && p[1] == '"' {
				// A quoted key: find its closing quote.
				if q, err := strconv.QuotedPrefix(p[1:]); err == nil {
					end = 1 + len(q)
				}
			}
			i := strings.IndexByte(p[end:], ']')
			if i < 0 {
				return append(segs, p)
			}
			segs = append(segs, p[:end+i+1])
			p = p[end+i+1:]
		default:
			i := strings.IndexAny(p, ".[")
			if i < 0 {
				i = len(p)
			}
			segs = append(segs, p[:i])
			p = p[i:]
		}
	}
	return segs
}

// child is n's member named by a path segment, or nil.
func child(n *yaml.Node, seg string) *yaml.Node {
	key := seg
	if strings.HasPrefix(seg, "[") {
		inner := seg[1 : len(seg)-1]
		if i, err := strconv.Atoi(inner); err == nil {
			if n.Kind == yaml.SequenceNode && i >= 0 && i < len(n.Content) {
				return n.Content[i]
			}
			return nil
		}
		if u, err := strconv.Unquote(inner); err == nil {
			key = u
		}
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
