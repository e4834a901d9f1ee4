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

	"github.com/throttlekit/throttle/internal/clip"
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
//	block_file: blocked.txt      # more, one a line, any number (ReadPrefixes)
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
//	      "POST /api/export":
//	        problem: temporary-reduced-capacity # 503 (default: quota-exceeded, 429)
//	        limits:
//	          - {algorithm: concurrency, limit: 1}
//	  pro:
//	    default:
//	      limits:
//	        - {algorithm: token_bucket, rate: 100/s, limit: 200}
//
// Unknown or repeated fields and keys are errors, as are numbers where
// durations belong (60 is not a minute) and rules that fail
// limiters.Spec.Validate. At most MaxPolicySize bytes are read, and at most
// MaxPolicyNodes nodes decoded.
func LoadPolicy(path string, opts ...PolicyOption) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("server: policy: %w", err)
	}
	defer f.Close()
	// Read one byte past the cap, to tell a file at the cap from a larger one.
	data, err := io.ReadAll(io.LimitReader(f, MaxPolicySize+1))
	if err != nil {
		return nil, fmt.Errorf("server: policy: %w", err)
	}
	format := "yaml"
	if strings.EqualFold(filepath.Ext(path), ".json") {
		format = "json"
	}
	opts = append([]PolicyOption{WithPolicyDir(filepath.Dir(path))}, opts...)
	p, err := ParsePolicy(data, format, opts...)
	if pe, ok := err.(*PolicyError); ok {
		pe.File = path
	}
	return p, err
}

// MaxPolicySize is the largest policy file, in bytes, that LoadPolicy,
// ParsePolicy and DecodePolicyConfig read: 1 MiB. A larger one is a
// *PolicyError, and nothing of it is parsed.
const MaxPolicySize = 1 << 20

// MaxPolicyNodes bounds the YAML (or JSON) nodes of a policy, counted with
// every alias expanded as often as it is used: 262,144. Aliases are welcome
// (one list of limits shared by several endpoints), but a document whose
// expansion exceeds the bound (the "billion laughs" of nested aliases) is a
// *PolicyError, found in time linear in its size.
const MaxPolicyNodes = 1 << 18

// ParsePolicy compiles a policy from data in format "yaml" (or "yml") or
// "json", checked as LoadPolicy checks a file; see LoadPolicy for the
// format.
func ParsePolicy(data []byte, format string, opts ...PolicyOption) (*Policy, error) {
	cfg, root, err := decode(data, format)
	if err != nil {
		return nil, err
	}
	p, err := NewPolicy(cfg, opts...)
	if err != nil {
		return nil, locate(root, err)
	}
	return p, nil
}

// DecodePolicyConfig reads a PolicyConfig from JSON (format "json") or YAML
// ("yaml"), checking it as LoadPolicy does except for NewPolicy's checks.
func DecodePolicyConfig(data []byte, format string) (PolicyConfig, error) {
	cfg, _, err := decode(data, format)
	return cfg, err
}

// decode reads and checks a PolicyConfig, and returns the document's root
// node too, for locate.
func decode(data []byte, format string) (PolicyConfig, *yaml.Node, error) {
	format = strings.ToLower(format)
	switch format {
	case "json", "yaml", "yml":
	default:
		return PolicyConfig{}, nil, fmt.Errorf("server: policy: unknown format %s; want json or yaml", clip.Quote(format))
	}
	if len(data) > MaxPolicySize {
		return PolicyConfig{}, nil, &PolicyError{Err: fmt.Errorf("larger than MaxPolicySize (%d bytes)", MaxPolicySize)}
	}
	if format == "json" {
		if err := checkJSON(data); err != nil {
			return PolicyConfig{}, nil, err
		}
	}
	return decodeYAML(data)
}

// checkJSON checks that data is strict JSON (with the line and column of a
// syntax error). It is then decoded as YAML, of which JSON is a subset, so
// that both formats share one decoder, one set of checks and positions.
func checkJSON(data []byte) error {
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
		return &PolicyError{Line: line, Column: col, Err: err}
	}
	if _, ok := v.(map[string]any); !ok {
		return &PolicyError{Line: 1, Column: 1, Err: errors.New("want a JSON object")}
	}
	return nil
}

// lineCol converts a byte offset into a 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

func decodeYAML(data []byte) (PolicyConfig, *yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return PolicyConfig{}, nil, yamlError(err)
	}
	if len(root.Content) == 0 {
		return PolicyConfig{}, nil, &PolicyError{Line: 1, Column: 1, Err: errors.New("empty policy")}
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return PolicyConfig{}, nil, &PolicyError{Line: doc.Line, Column: doc.Column, Err: errors.New("want a mapping of policy fields")}
	}
	var cfg PolicyConfig
	d := decoder{budget: MaxPolicyNodes}
	if err := d.decode(doc, reflect.ValueOf(&cfg).Elem()); err != nil {
		pe := err.(*PolicyError)
		slices.Reverse(pe.path) // gathered from the failing node up
		pe.Path = joinPath(pe.path)
		return PolicyConfig{}, nil, pe
	}
	return cfg, doc, nil
}

// yamlError turns yaml.v3's "yaml: line 3: ..." into a *PolicyError.
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
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

// decoder decodes a YAML node tree into the Go value of a policy, strictly:
// it reports the first mismatch with its field path and position (unknown
// or repeated fields, numbers for durations, malformed rates, wrong kinds of
// values). It is ours rather than yaml.v3's Decode for two bounds: budget is
// how many more nodes it may visit, each alias counted at every use, so
// nested aliases cost at most MaxPolicyNodes visits; and repeated keys are
// found with a map, where yaml.v3 compares every pair of a mapping's keys.
type decoder struct{ budget int }

// decode decodes n into v, which is settable and zero. Its error is a
// *PolicyError whose path is gathered as the recursion unwinds, from the
// failing node up (see within), so that the walk allocates no paths.
func (d *decoder) decode(n *yaml.Node, v reflect.Value) error {
	fail := func(format string, args ...any) error {
		return &PolicyError{Line: n.Line, Column: n.Column, Err: fmt.Errorf(format, args...)}
	}
	if d.budget--; d.budget < 0 {
		return fail("more than MaxPolicyNodes (%d) YAML nodes once aliases are expanded", MaxPolicyNodes)
	}
	if n.Kind == yaml.AliasNode {
		return d.decode(n.Alias, v)
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if v.Kind() == reflect.Pointer {
		v.Set(reflect.New(v.Type().Elem()))
		v = v.Elem()
	}
	t := v.Type()
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return fail("want a duration string such as \"1m\" or \"2s\", got %s", describe(n))
		}
		dur, err := time.ParseDuration(n.Value)
		if err != nil {
			return fail("want a duration such as \"1m\" or \"2s\", got %s", clip.Quote(n.Value))
		}
		v.SetInt(int64(dur))
		return nil
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		if n.Kind != yaml.ScalarNode {
			return fail("want a string, got %s", describe(n))
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			return fail("%v", err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping, got %s", describe(n))
		}
		var seen uint64 // by field index
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			f, ok := fieldByTag(t, k.Value)
			if !ok {
				return &PolicyError{Line: k.Line, Column: k.Column, Err: fmt.Errorf("unknown field %s; want one of %s", clip.Quote(k.Value), strings.Join(fieldNames(t), ", "))}
			}
			if seen&(1<<f) != 0 {
				return &PolicyError{Line: k.Line, Column: k.Column, Err: fmt.Errorf("field %s given twice", clip.Quote(k.Value))}
			}
			seen |= 1 << f
			if err := d.decode(n.Content[i+1], v.Field(f)); err != nil {
				return within(err, name(k.Value))
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping, got %s", describe(n))
		}
		v.Set(reflect.MakeMapWithSize(t, len(n.Content)/2))
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fail("want string keys")
			}
			key := reflect.ValueOf(k.Value)
			if v.MapIndex(key).IsValid() {
				return &PolicyError{Line: k.Line, Column: k.Column, Err: fmt.Errorf("key %s given twice", clip.Quote(k.Value))}
			}
			elem := reflect.New(t.Elem()).Elem()
			if err := d.decode(n.Content[i+1], elem); err != nil {
				return within(err, name(k.Value))
			}
			v.SetMapIndex(key, elem)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fail("want a list, got %s", describe(n))
		}
		v.Set(reflect.MakeSlice(t, len(n.Content), len(n.Content)))
		for i, e := range n.Content {
			if err := d.decode(e, v.Index(i)); err != nil {
				return within(err, at(i))
			}
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return fail("want a string, got %s", describe(n))
		}
		v.SetString(n.Value)
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return fail("want an integer, got %s", describe(n))
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, strconv.IntSize)
		if err != nil {
			return fail("want an integer, got %s", clip.String(n.Value))
		}
		v.SetInt(i)
	default:
		return fail("cannot decode into %s", t) // no such field in a PolicyConfig
	}
	return nil
}

// within adds s, the step that led to a failing node, to the path of
// decode's error.
func within(err error, s seg) error {
	pe := err.(*PolicyError)
	pe.path = append(pe.path, s)
	return err
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
		return "the number " + clip.String(n.Value)
	case "!!bool":
		return "the boolean " + clip.String(n.Value)
	}
	return clip.Quote(n.Value)
}

// fieldByTag finds the index of t's field whose yaml tag is name.
func fieldByTag(t reflect.Type, name string) (int, bool) {
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag == name && tag != "-" {
			return i, true
		}
	}
	return 0, false
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
// walking the document's nodes from doc.
func locate(doc *yaml.Node, err error) error {
	pe, ok := err.(*PolicyError)
	if !ok || pe.Line > 0 {
		return err
	}
	n := doc
	for _, s := range pe.path {
		next := child(n, s)
		if next == nil {
			break
		}
		n = next
	}
	pe.Line, pe.Column = n.Line, n.Column
	return pe
}

// child is n's member named by s, or nil.
func child(n *yaml.Node, s seg) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if s.isIndex {
		if n.Kind == yaml.SequenceNode && s.index < len(n.Content) {
			return n.Content[s.index]
		}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == s.key {
			return n.Content[i+1]
		}
	}
	return nil
}
