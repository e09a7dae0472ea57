package agentserver

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Bounds on every number of an uploaded result, wherever it stands: the
// aggregates, the per-request arrays (itls, perfgate.e2els_ms, …), the
// nested sections and keys perfgate does not know (kept in the stored
// upload). What a benchmark can measure sits far inside them; anything
// outside is refused, naming the number's path.
const (
	// maxSeconds bounds a latency or duration in seconds: a day.
	maxSeconds = 86400.0
	// maxMS is the same day in milliseconds.
	maxMS = maxSeconds * 1000
	// maxNumber bounds any other number: counts, tokens, clocks, watts,
	// joules; exactly representable as an integer in a float64 below it.
	maxNumber = 1e15
	// maxNumberErrors is how many refusals one answer lists.
	maxNumberErrors = 10
)

// numberRule is the range one number may take.
type numberRule struct {
	min, max float64
	what     string // the bound in words, for the refusal
}

// secondKeys hold latencies in seconds (vLLM's per-request arrays).
var secondKeys = map[string]bool{"ttfts": true, "itls": true, "duration": true}

// fractionKeys hold shares between 0 and 1.
var fractionKeys = map[string]bool{"error_rate": true, "max_error_rate": true, "prefix_cache_hit_rate": true}

// ruleFor is the range of a number found under key (the nearest object
// key: an array's elements take the array's). signed is set inside the
// client–server TTFT gap, a difference; unknown inside keys no perfgate
// type declares.
func ruleFor(key string, signed, unknown bool) numberRule {
	switch {
	case key == "seed":
		return numberRule{math.MinInt64, math.MaxInt64, "an int64 seed"}
	case secondKeys[key]:
		return numberRule{0, maxSeconds, "seconds: at most a day"}
	case strings.HasSuffix(key, "_ms") && signed:
		return numberRule{-maxMS, maxMS, "ms: within a day either way"}
	case strings.HasSuffix(key, "_ms"):
		return numberRule{0, maxMS, "ms: at most a day"}
	case fractionKeys[key]:
		return numberRule{0, 1, "a share between 0 and 1"}
	case strings.Contains(key, "throughput") || strings.HasSuffix(key, "_per_s") || strings.HasSuffix(key, "_rate") || strings.Contains(key, "goodput"):
		return numberRule{0, maxThroughput, fmt.Sprintf("per second: at most %g", maxThroughput)}
	case unknown:
		return numberRule{-maxNumber, maxNumber, fmt.Sprintf("within ±%g", maxNumber)}
	}
	return numberRule{0, maxNumber, fmt.Sprintf("between 0 and %g", maxNumber)}
}

// checkNumbers reads raw as a result and refuses every number outside its
// range or, where perfgate's type holds an integer, not a whole number,
// each by its path (perfgate.e2els_ms[3]). It scans the bytes once,
// without building a tree or a token per value (a result is large); JSON
// it cannot read passes, for the decoder to refuse.
func checkNumbers(raw []byte) error {
	sc := numberScan{raw: raw}
	for sc.i < len(raw) {
		var done bool
		switch c := raw[sc.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ':':
			sc.separator(c)
		case c == '{' || c == '[':
			sc.open(c)
		case c == '}' || c == ']':
			done = sc.close()
		case c == '"':
			done = sc.str()
		case c == '-' || (c >= '0' && c <= '9'):
			sc.number()
		default: // true, false, null
			done = sc.literal()
		}
		if done {
			return nil
		}
	}
	return errors.Join(sc.errs...)
}

// numberScan is checkNumbers' state: where it is in raw, the containers
// it is in, and the rule of the numbers at hand.
type numberScan struct {
	raw       []byte
	i         int
	stack     []numberFrame
	errs      []error
	expectKey bool
	// A number's rule depends only on where it stands: cache it per
	// container, so an array of a million latencies looks it up once.
	cached struct {
		depth int
		valid bool
		t     reflect.Type
		rule  numberRule
	}
}

// numberFrame is one container the scan is in.
type numberFrame struct {
	object   bool
	t        reflect.Type // the container's Go type; nil: unknown
	key      string       // the object key this container stands under
	root     bool
	idx      int    // arrays: the current element
	childKey string // objects: the key of the current member
}

// child is the type, key and unknown-ness of the value at hand.
func (sc *numberScan) child() (reflect.Type, string, bool) {
	if len(sc.stack) == 0 {
		return resultType, "", false
	}
	top := &sc.stack[len(sc.stack)-1]
	if top.object {
		ft, known := fieldType(top.t, top.childKey, top.root)
		return ft, top.childKey, !known
	}
	return elemType(top.t), top.key, top.t == nil
}

// path is where the value at hand stands: perfgate.e2els_ms[3].
func (sc *numberScan) path() string {
	var b strings.Builder
	for i, f := range sc.stack {
		if f.object {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.childKey)
		} else {
			b.WriteString("[" + strconv.Itoa(f.idx) + "]")
		}
	}
	return b.String()
}

// signed reports whether the value at hand is under the TTFT gap, whose
// milliseconds may be negative.
func (sc *numberScan) signed() bool {
	for _, f := range sc.stack {
		if f.key == "client_server_ttft_gap" || (f.object && f.childKey == "client_server_ttft_gap") {
			return true
		}
	}
	return false
}

// separator steps over white space, a colon or a comma; a comma moves to
// an object's next key or an array's next element.
func (sc *numberScan) separator(c byte) {
	if c == ',' && len(sc.stack) > 0 {
		if top := &sc.stack[len(sc.stack)-1]; top.object {
			sc.expectKey = true
		} else {
			top.idx++
		}
	}
	sc.i++
}

// open enters an object or an array.
func (sc *numberScan) open(c byte) {
	t, key, _ := sc.child()
	sc.stack = append(sc.stack, numberFrame{object: c == '{', t: t, key: key, root: len(sc.stack) == 0})
	sc.expectKey = c == '{'
	sc.cached.valid = false
	sc.i++
}

// close leaves an object or an array; one too many ends the scan.
func (sc *numberScan) close() (done bool) {
	if len(sc.stack) == 0 {
		return true
	}
	sc.stack = sc.stack[:len(sc.stack)-1]
	sc.expectKey = false
	sc.cached.valid = false
	sc.i++
	return false
}

// str steps over a string, keeping it as the key when one is expected;
// an unterminated string ends the scan.
func (sc *numberScan) str() (done bool) {
	raw, i := sc.raw, sc.i
	j := i + 1
	escaped := false
	for j < len(raw) && raw[j] != '"' {
		if raw[j] == '\\' {
			escaped = true
			j++
		}
		j++
	}
	if j >= len(raw) {
		return true
	}
	if sc.expectKey && len(sc.stack) > 0 {
		k := string(raw[i+1 : j])
		if escaped {
			if u, err := strconv.Unquote(string(raw[i : j+1])); err == nil {
				k = u
			}
		}
		sc.stack[len(sc.stack)-1].childKey = k
		sc.expectKey = false
		sc.cached.valid = false
	}
	sc.i = j + 1
	return false
}

// number checks the number at hand against the rule of where it stands.
func (sc *numberScan) number() {
	raw, i := sc.raw, sc.i
	j := i + 1
	for j < len(raw) && (raw[j] == '.' || raw[j] == 'e' || raw[j] == 'E' || raw[j] == '+' || raw[j] == '-' || (raw[j] >= '0' && raw[j] <= '9')) {
		j++
	}
	if !sc.cached.valid || sc.cached.depth != len(sc.stack) {
		t, key, unknown := sc.child()
		sc.cached.t, sc.cached.rule, sc.cached.depth = t, ruleFor(key, strings.HasSuffix(key, "_ms") && sc.signed(), unknown), len(sc.stack)
		// An object's members differ; an array's elements share one rule.
		sc.cached.valid = len(sc.stack) > 0 && !sc.stack[len(sc.stack)-1].object
	}
	if msg := checkNumber(raw[i:j], sc.cached.t, sc.cached.rule); msg != "" && len(sc.errs) < maxNumberErrors {
		sc.errs = append(sc.errs, fmt.Errorf("%s is %s: %s", sc.path(), raw[i:j], msg))
	}
	sc.i = j
}

// literal steps over true, false or null; anything else is not JSON and
// ends the scan, for the decoder to say why.
func (sc *numberScan) literal() (done bool) {
	raw := sc.raw
	for sc.i < len(raw) && raw[sc.i] >= 'a' && raw[sc.i] <= 'z' {
		sc.i++
	}
	i := sc.i
	return i < len(raw) && !(raw[i] == ',' || raw[i] == '}' || raw[i] == ']' || raw[i] == ' ' || raw[i] == '\n' || raw[i] == '\t' || raw[i] == '\r')
}

// checkNumber says what is wrong with the number n held by a value of
// type t under rule r, or "".
func checkNumber(n []byte, t reflect.Type, r numberRule) string {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "not a finite number"
	}
	if t != nil && isInt(t) && f != math.Trunc(f) {
		return "must be a whole number"
	}
	if f < r.min || f > r.max {
		return "out of range (" + r.what + ")"
	}
	return ""
}

var resultType = reflect.TypeOf(result.Result{})

func isInt(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// elemType is the element type of a slice or map type; nil when unknown.
func elemType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return t.Elem()
	}
	return nil
}

// fieldType is the type of key inside a value of type t, and whether a
// perfgate type declares it: a struct's field by its JSON name, a map's
// element, at the root a flat metric (a float).
func fieldType(t reflect.Type, key string, root bool) (reflect.Type, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return nil, false
	}
	switch t.Kind() {
	case reflect.Map:
		return t.Elem(), true
	case reflect.Struct:
		if ft, ok := jsonFields(t)[key]; ok {
			return ft, true
		}
		if root && result.IsMetricKey(key) {
			return reflect.TypeOf(float64(0)), true
		}
	}
	return nil, false
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields maps a struct's JSON names to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}
