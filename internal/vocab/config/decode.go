package config

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Parse decodes a config onto the defaults and validates it. An empty file
// is Default(). Bad input returns a *ValidationError.
func Parse(filename string, data []byte) (*Config, error) {
	c := Default()
	d := &decoder{file: filename, pos: map[string]position{}, set: map[string]bool{}, signed: map[string]bool{}}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &ValidationError{Errors: []FieldError{syntaxError(filename, data, err)}}
	}
	if len(root.Content) == 0 {
		return c, nil
	}
	doc := root.Content[0]
	if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
		return c, nil
	}
	d.decode("", doc, reflect.ValueOf(c).Elem())
	// One pass: the values that decoded are validated even when others did
	// not, so a file's problems come in one report, not one round per
	// kind. A field whose value did not decode keeps its default, so what
	// validation says about it (or about what contains it or lies in it)
	// is dropped: the decoding error already names the field.
	if !d.aborted {
		decodeErrs := d.errs
		d.errs = nil
		d.finish(c)
		d.validate(c)
		for _, e := range d.errs {
			if !overlaps(e.Field, decodeErrs) {
				decodeErrs = append(decodeErrs, e)
			}
		}
		d.errs = decodeErrs
	}
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool {
			if d.errs[i].Line != d.errs[j].Line {
				return d.errs[i].Line < d.errs[j].Line
			}
			return d.errs[i].Column < d.errs[j].Column
		})
		return nil, &ValidationError{Errors: d.errs}
	}
	return c, nil
}

type position struct{ line, col int }

// decoder walks yaml nodes into the struct by yaml tags, recording where
// each field was written so validation can point at it.
type decoder struct {
	file   string
	errs   []FieldError
	pos    map[string]position
	set    map[string]bool // fields the file wrote
	signed map[string]bool // thresholds whose direction came from a sign
	// values and aliases count what decoding has expanded (see maxValues).
	values, aliases int
	aborted         bool
}

// abort stops decoding with one error: nothing after it is read.
func (d *decoder) abort(n *yaml.Node, field, msg string) {
	d.errAt(n, field, msg, "write the values out; perfgate reads at most a few hundred")
	d.aborted = true
}

func (d *decoder) errAt(n *yaml.Node, field, msg, hint string) {
	d.errs = append(d.errs, FieldError{File: d.file, Line: n.Line, Column: n.Column, Field: field, Message: msg, Hint: hint})
}

// errField reports a validation error at the place the field was written,
// or at its nearest written parent.
func (d *decoder) errField(field, msg, hint string) {
	p := field
	for {
		if at, ok := d.pos[p]; ok {
			d.errs = append(d.errs, FieldError{File: d.file, Line: at.line, Column: at.col, Field: field, Message: msg, Hint: hint})
			return
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			d.errs = append(d.errs, FieldError{File: d.file, Line: 1, Column: 1, Field: field, Message: msg, Hint: hint})
			return
		}
		p = p[:i]
	}
}

var (
	rateType      = reflect.TypeOf(result.Rate(0))
	durationType  = reflect.TypeOf(Duration(0))
	percentType   = reflect.TypeOf(Percent(0))
	thresholdType = reflect.TypeOf(Threshold{})
	tierType      = reflect.TypeOf(Tier{})
)

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Limits on what one file may expand to. YAML aliases let a few lines
// stand for billions of values ("billion laughs"); a perfgate config has a
// few hundred, so these only stop a file built to exhaust the server.
const (
	maxAliases = 100
	maxValues  = 10000
)

func (d *decoder) decode(path string, n *yaml.Node, v reflect.Value) {
	if d.aborted {
		return
	}
	if d.values++; d.values > maxValues {
		d.abort(n, path, fmt.Sprintf("the file expands to more than %d values", maxValues))
		return
	}
	if n.Kind == yaml.AliasNode {
		if d.aliases++; d.aliases > maxAliases {
			d.abort(n, path, fmt.Sprintf("more than %d alias expansions (*name)", maxAliases))
			return
		}
		n = n.Alias
	}
	d.pos[path] = position{n.Line, n.Column}
	d.set[path] = true
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // "key:" with no value keeps the default
	}
	switch v.Type() {
	case rateType:
		d.decodeRate(path, n, v)
		return
	case durationType:
		d.decodeDuration(path, n, v)
		return
	case percentType:
		p, ok := d.percent(path, n)
		if ok {
			v.SetFloat(p)
		}
		return
	case thresholdType:
		d.decodeThreshold(path, n, v)
		return
	}
	d.decodeKind(path, n, v)
}

// decodeKind decodes n into v by v's kind: a struct, map or list, or a
// scalar checked against its YAML tag.
func (d *decoder) decodeKind(path string, n *yaml.Node, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(path, n, v)
	case reflect.Map:
		d.decodeMap(path, n, v)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errAt(n, path, "want a list", "write [a, b] or one \"- item\" per line")
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(fmt.Sprintf("%s[%d]", path, i), item, s.Index(i))
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.errAt(n, path, "want a string", "")
			return
		}
		v.SetString(n.Value)
	case reflect.Int:
		var i int
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
			d.errAt(n, path, fmt.Sprintf("want a whole number, got %q", n.Value), "")
			return
		}
		v.SetInt(int64(i))
	case reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
			d.errAt(n, path, fmt.Sprintf("want a number, got %q", n.Value), "")
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.errAt(n, path, fmt.Sprintf("want true or false, got %q", n.Value), "")
			return
		}
		v.SetBool(n.Value == "true" || n.Value == "True" || n.Value == "TRUE")
	default:
		panic("config: no decoder for " + v.Type().String())
	}
}

func (d *decoder) decodeStruct(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.errAt(n, path, "want a mapping of keys to values", "")
		return
	}
	t := v.Type()
	fields := map[string]int{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = i
		names = append(names, tag)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		field := join(path, k.Value)
		if seen[k.Value] {
			d.errAt(k, field, "duplicate key", "keep one")
			continue
		}
		seen[k.Value] = true
		idx, ok := fields[k.Value]
		if !ok {
			hint := didYouMean(k.Value, names)
			if hint == "" {
				sort.Strings(names)
				hint = "valid keys: " + strings.Join(names, ", ")
			}
			d.errAt(k, field, fmt.Sprintf("unknown key %q", k.Value), hint)
			continue
		}
		d.decode(field, val, v.Field(idx))
	}
}

func (d *decoder) decodeMap(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.errAt(n, path, "want a mapping of names to values", "")
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		field := join(path, k.Value)
		if seen[k.Value] {
			d.errAt(k, field, "duplicate key", "keep one")
			continue
		}
		seen[k.Value] = true
		key := reflect.ValueOf(k.Value)
		// "off" removes an entry the defaults put there.
		if val.Kind == yaml.ScalarNode && val.Value == "off" && val.Tag == "!!str" {
			d.pos[field] = position{val.Line, val.Column}
			v.SetMapIndex(key, reflect.Value{})
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		if old := v.MapIndex(key); old.IsValid() {
			elem.Set(old)
			if elem.Kind() == reflect.Struct {
				elem.Set(deepCopyTier(old))
			}
		} else if v.Type().Elem() == tierType {
			elem.Set(reflect.ValueOf(defaultTier(k.Value)))
		}
		d.decode(field, val, elem)
		v.SetMapIndex(key, elem)
	}
}

// deepCopyTier copies a tier's maps so decoding onto it cannot change the
// defaults it came from.
func deepCopyTier(v reflect.Value) reflect.Value {
	t, ok := v.Interface().(Tier)
	if !ok {
		return v
	}
	t.Metrics = copyThresholds(t.Metrics)
	t.Secondary = copyThresholds(t.Secondary)
	t.Matrix = append([]MatrixEntry(nil), t.Matrix...)
	return reflect.ValueOf(t)
}

func copyThresholds(m map[string]Threshold) map[string]Threshold {
	if m == nil {
		return nil
	}
	out := make(map[string]Threshold, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (d *decoder) decodeRate(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.errAt(n, path, "want a request rate", `a number of requests/s, or "inf"`)
		return
	}
	r, err := result.ParseRate(n.Value)
	if err != nil {
		d.errAt(n, path, fmt.Sprintf("invalid request rate %q", n.Value), `a positive number of requests/s, or "inf" for all at once`)
		return
	}
	v.SetFloat(float64(r))
}

var daySuffix = regexp.MustCompile(`^([0-9]+)d$`)

func (d *decoder) decodeDuration(path string, n *yaml.Node, v reflect.Value) {
	s := n.Value
	var dur time.Duration
	var err error
	if m := daySuffix.FindStringSubmatch(s); m != nil {
		days, _ := strconv.Atoi(m[1])
		dur = time.Duration(days) * 24 * time.Hour
	} else {
		dur, err = time.ParseDuration(s)
	}
	if n.Kind != yaml.ScalarNode || err != nil {
		d.errAt(n, path, fmt.Sprintf("invalid duration %q", s), "write it like 48h, 90m or 2d")
		return
	}
	if dur <= 0 {
		d.errAt(n, path, fmt.Sprintf("duration %q must be positive", s), "")
		return
	}
	v.SetInt(int64(dur))
}

// percent reads "5%" or "-5%" as a signed fraction.
func (d *decoder) percent(path string, n *yaml.Node) (float64, bool) {
	s := strings.TrimSpace(n.Value)
	if n.Kind != yaml.ScalarNode || !strings.HasSuffix(s, "%") {
		d.errAt(n, path, fmt.Sprintf("want a percentage, got %q", n.Value), "write it with a percent sign, e.g. 5% or -5%")
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		d.errAt(n, path, fmt.Sprintf("want a percentage, got %q", n.Value), "write it with a percent sign, e.g. 5% or -5%")
		return 0, false
	}
	return f / 100, true
}

// decodeThreshold reads "5%" (higher is worse), "-5%" (lower is worse) or
// {limit: 5%, direction: lower_is_worse}.
func (d *decoder) decodeThreshold(path string, n *yaml.Node, v reflect.Value) {
	var t Threshold
	switch n.Kind {
	case yaml.ScalarNode:
		p, ok := d.percent(path, n)
		if !ok {
			return
		}
		t.Limit, t.Direction = math.Abs(p), HigherIsWorse
		if p < 0 {
			t.Direction = LowerIsWorse
		}
		d.signed[path] = true
	case yaml.MappingNode:
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			field := path + "." + k.Value
			if seen[k.Value] {
				d.errAt(k, field, "duplicate key", "keep one")
				continue
			}
			seen[k.Value] = true
			d.pos[field] = position{val.Line, val.Column}
			switch k.Value {
			case "limit":
				p, ok := d.percent(field, val)
				if !ok {
					continue
				}
				if p < 0 {
					d.errAt(val, field, "a limit with a direction is positive", "drop the minus sign; direction says which way is worse")
					continue
				}
				t.Limit = p
			case "direction":
				switch Direction(val.Value) {
				case HigherIsWorse, LowerIsWorse:
					t.Direction = Direction(val.Value)
				default:
					d.errAt(val, field, fmt.Sprintf("unknown direction %q", val.Value),
						orList(didYouMean(val.Value, []string{string(HigherIsWorse), string(LowerIsWorse)}), "higher_is_worse or lower_is_worse"))
				}
			default:
				d.errAt(k, field, fmt.Sprintf("unknown key %q", k.Value), orList(didYouMean(k.Value, []string{"limit", "direction"}), "valid keys: limit, direction"))
			}
		}
	default:
		d.errAt(n, path, "want a percentage such as 5% or {limit: 5%, direction: higher_is_worse}", "")
		return
	}
	v.Set(reflect.ValueOf(t))
}

func orList(hint, fallback string) string {
	if hint != "" {
		return hint
	}
	return fallback
}

var yamlLine = regexp.MustCompile(`line ([0-9]+)`)

// syntaxError places a YAML syntax error. yaml.v3 reports parser errors
// on the line before the problem (or where the enclosing block began) and
// some with no line at all, so the line is found again: the first prefix
// of the file, in whole lines, that fails with the same message, from the
// line yaml named on. The column is the line's first character.
func syntaxError(file string, data []byte, err error) FieldError {
	reported := 1
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		reported, _ = strconv.Atoi(m[1])
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = yamlLine.ReplaceAllString(msg, "")
	msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(msg), ":"))
	line, col := syntaxLine(data, msg, reported)
	return FieldError{File: file, Line: line, Column: col, Message: "YAML syntax: " + msg, Hint: "check the indentation and quoting on this line"}
}

// maxSyntaxSearch bounds the lines syntaxLine re-parses prefixes of.
const maxSyntaxSearch = 2000

func syntaxLine(data []byte, msg string, reported int) (line, col int) {
	lines := strings.SplitAfter(string(data), "\n")
	line = max(reported, 1)
	if len(lines) <= maxSyntaxSearch {
		for k := max(reported, 1); k <= len(lines); k++ {
			var n yaml.Node
			err := yaml.Unmarshal([]byte(strings.Join(lines[:k], "")), &n)
			if err == nil {
				continue
			}
			m := strings.TrimPrefix(err.Error(), "yaml: ")
			m = yamlLine.ReplaceAllString(m, "")
			if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(m), ":")) == msg {
				line = k
				break
			}
		}
	}
	col = 1
	if line <= len(lines) {
		text := lines[line-1]
		col = len(text) - len(strings.TrimLeft(text, " ")) + 1
		if strings.TrimSpace(text) == "" {
			col = 1
		}
	}
	return line, col
}

// overlaps reports whether field is, contains or lies within a field that
// failed to decode.
func overlaps(field string, errs []FieldError) bool {
	for _, e := range errs {
		if e.Field == "" {
			continue
		}
		if field == e.Field || strings.HasPrefix(field, e.Field+".") || strings.HasPrefix(field, e.Field+"[") ||
			strings.HasPrefix(e.Field, field+".") || strings.HasPrefix(e.Field, field+"[") {
			return true
		}
	}
	return false
}
