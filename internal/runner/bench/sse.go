package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// chunk is what one SSE data payload of an OpenAI-compatible stream says
// that the benchmark cares about. Parsing fills it without allocating: the
// client parses one of these per output token, so this is its hot path.
type chunk struct {
	// token is true when choices[0] carries generated output: a non-empty
	// delta.content, delta.reasoning_content or delta.reasoning (reasoning
	// models stream their thinking there), a non-empty delta.tool_calls
	// (chat), or a non-empty text (completions). One streamed token, or
	// several bundled. A chunk with only a role or only a finish_reason is
	// not a token.
	token bool
	// text is the raw (still JSON-escaped) generated text of the chunk,
	// valid until the next line is read; nil for tool calls. textAt and
	// textEnd bound its JSON string, quotes included, in the payload.
	text            []byte
	textAt, textEnd int
	// usage block, sent last when stream_options.include_usage is set.
	hasUsage         bool
	completionTokens int
	promptTokens     int
	// errMsg is set when the server reported an error inside the stream.
	errMsg string
	// finished is set when choices[0] has a finish_reason: the server
	// says the generation is over, a terminal event like [DONE].
	finished bool
}

var (
	errNotObject = errors.New("not a JSON object")
	errSyntax    = errors.New("invalid JSON")
	errDepth     = errors.New("JSON nested too deeply")
)

// parseChunk reads one data payload into c. It walks the JSON by hand
// because encoding/json's reflection costs microseconds per token, which is
// more than the rest of the client's per-token work together; it still
// checks the whole payload is well-formed, so a malformed line fails the
// request rather than passing silently.
func parseChunk(b []byte, c *chunk) error {
	*c = chunk{}
	s := scanner{b: b}
	s.ws()
	if !s.eat('{') {
		return errNotObject
	}
	var isErrorObject, errorIsString bool
	var topMessage []byte
	for first := true; ; first = false {
		s.ws()
		if s.eat('}') {
			break
		}
		if !first && !s.eatComma() {
			return errSyntax
		}
		key, err := s.key()
		if err != nil {
			return err
		}
		switch string(key) {
		case "choices":
			err = s.choices(c)
		case "usage":
			err = s.usage(c)
		case "error":
			errorIsString = s.i < len(s.b) && s.b[s.i] == '"'
			err = s.errorField(c)
		case "object":
			var v []byte
			if v, err = s.maybeString(); err == nil && string(v) == "error" {
				isErrorObject = true
			}
		case "message":
			topMessage, err = s.maybeString()
		default:
			err = s.skip(0)
		}
		if err != nil {
			return err
		}
	}
	s.ws()
	if s.i != len(s.b) {
		return errSyntax
	}
	if errorIsString && len(topMessage) > 0 {
		c.errMsg = unquote(topMessage) // the message beside a status name
	}
	// vLLM's older error shape: {"object":"error","message":"…",…}.
	if isErrorObject && c.errMsg == "" {
		c.errMsg = unquote(topMessage)
		if c.errMsg == "" {
			c.errMsg = "server reported an error"
		}
	}
	return nil
}

// scanner walks a JSON document in place.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) eatComma() bool {
	if !s.eat(',') {
		return false
	}
	s.ws()
	return true
}

// key reads `"name" :` and returns the raw (still escaped) name.
func (s *scanner) key() ([]byte, error) {
	k, err := s.str()
	if err != nil {
		return nil, err
	}
	s.ws()
	if !s.eat(':') {
		return nil, errSyntax
	}
	s.ws()
	return k, nil
}

// str reads a string and returns its raw bytes between the quotes. It
// jumps from quote to quote with IndexByte (vectorised) and counts the
// backslashes before each to tell an escaped quote from the closing one;
// control characters inside strings are tolerated rather than checked.
func (s *scanner) str() ([]byte, error) {
	if !s.eat('"') {
		return nil, errSyntax
	}
	start := s.i
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			return nil, errSyntax
		}
		end := s.i + j
		k := end
		for k > start && s.b[k-1] == '\\' {
			k--
		}
		s.i = end + 1
		if (end-k)%2 == 0 {
			return s.b[start:end], nil
		}
	}
}

// maybeString reads a string or null (returned as nil).
func (s *scanner) maybeString() ([]byte, error) {
	if s.lit("null") {
		return nil, nil
	}
	if s.i < len(s.b) && s.b[s.i] == '"' {
		return s.str()
	}
	return nil, s.skip(0)
}

func (s *scanner) lit(word string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		s.i += len(word)
		return true
	}
	return false
}

// number reads a JSON number and returns its text.
func (s *scanner) number() ([]byte, error) {
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.i++
			continue
		}
		break
	}
	if s.i == start {
		return nil, errSyntax
	}
	return s.b[start:s.i], nil
}

// intValue reads a number (or null, as 0) as an int.
func (s *scanner) intValue() (int, error) {
	if s.lit("null") {
		return 0, nil
	}
	num, err := s.number()
	if err != nil {
		return 0, err
	}
	if n, err := strconv.Atoi(string(num)); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return 0, errSyntax
	}
	return int(f), nil
}

// skip steps over any one value, checking its syntax.
func (s *scanner) skip(depth int) error {
	if depth > 64 {
		return errDepth
	}
	if s.i >= len(s.b) {
		return errSyntax
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, err := s.str()
		return err
	case c == '{':
		s.i++
		for first := true; ; first = false {
			s.ws()
			if s.eat('}') {
				return nil
			}
			if !first && !s.eatComma() {
				return errSyntax
			}
			if _, err := s.key(); err != nil {
				return err
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
		}
	case c == '[':
		s.i++
		for first := true; ; first = false {
			s.ws()
			if s.eat(']') {
				return nil
			}
			if !first && !s.eatComma() {
				return errSyntax
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
		}
	case c == 't':
		if s.lit("true") {
			return nil
		}
	case c == 'f':
		if s.lit("false") {
			return nil
		}
	case c == 'n':
		if s.lit("null") {
			return nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := s.number()
		return err
	}
	return errSyntax
}

// choices reads the choices array; only the first choice counts, as in
// vLLM's client (the benchmark always asks for n=1).
func (s *scanner) choices(c *chunk) error {
	if s.lit("null") {
		return nil
	}
	if !s.eat('[') {
		return errSyntax
	}
	for idx := 0; ; idx++ {
		s.ws()
		if s.eat(']') {
			return nil
		}
		if idx > 0 && !s.eatComma() {
			return errSyntax
		}
		var err error
		if idx == 0 {
			err = s.choice(c)
		} else {
			err = s.skip(1)
		}
		if err != nil {
			return err
		}
	}
}

func (s *scanner) choice(c *chunk) error {
	if !s.eat('{') {
		return s.skip(1)
	}
	for first := true; ; first = false {
		s.ws()
		if s.eat('}') {
			return nil
		}
		if !first && !s.eatComma() {
			return errSyntax
		}
		key, err := s.key()
		if err != nil {
			return err
		}
		switch string(key) {
		case "text": // completions
			var v []byte
			if v, err = s.maybeString(); len(v) > 0 {
				c.token = true
				c.setText(v, s.i)
			}
		case "delta": // chat completions
			err = s.delta(c)
		case "finish_reason":
			var v []byte
			if v, err = s.maybeString(); len(v) > 0 {
				c.finished = true
			}
		default:
			err = s.skip(2)
		}
		if err != nil {
			return err
		}
	}
}

// delta reads a chat delta. vLLM's own client counts the first chunk with
// a choice as the first token and takes delta.content or
// delta.reasoning_content as its text; so do we, and reasoning (the field's
// newer name) and tool-call deltas count too.
func (s *scanner) delta(c *chunk) error {
	if s.lit("null") {
		return nil
	}
	if !s.eat('{') {
		return errSyntax
	}
	for first := true; ; first = false {
		s.ws()
		if s.eat('}') {
			return nil
		}
		if !first && !s.eatComma() {
			return errSyntax
		}
		key, err := s.key()
		if err != nil {
			return err
		}
		switch string(key) {
		case "content", "reasoning_content", "reasoning":
			var v []byte
			if v, err = s.maybeString(); len(v) > 0 {
				c.token = true
				c.setText(v, s.i)
			}
		case "tool_calls":
			var nonEmpty bool
			if nonEmpty, err = s.nonEmptyArray(); nonEmpty {
				c.token = true
			}
		default:
			err = s.skip(3)
		}
		if err != nil {
			return err
		}
	}
}

// setText keeps the first generated string of a chunk: raw is its body,
// end the index just past its closing quote.
func (c *chunk) setText(raw []byte, end int) {
	if c.text == nil {
		c.text, c.textAt, c.textEnd = raw, end-len(raw)-2, end
	}
}

// template is a stream's repeated chunk shape. Every token chunk of a
// stream from vLLM (or the sim) is the same bytes but for its text: once
// one has been parsed in full, a payload with the same bytes before and
// after its text string is well-formed exactly when that string is, and
// says the same things. Checking that costs two memory compares and one
// string scan instead of a walk over every key.
type template struct {
	prefix, suffix []byte
}

// learn makes t the shape of a fully parsed payload whose only variable
// part is its text.
func (t *template) learn(data []byte, c *chunk) {
	if !c.token || c.text == nil || c.hasUsage || c.errMsg != "" || c.finished || c.textAt < 0 {
		return
	}
	t.prefix = append(t.prefix[:0], data[:c.textAt]...)
	t.suffix = append(t.suffix[:0], data[c.textEnd:]...)
}

// match parses data into c when it has the template's shape and a
// non-empty text; otherwise it reports false and c is untouched.
func (t *template) match(data []byte, c *chunk) bool {
	n := len(data) - len(t.prefix) - len(t.suffix)
	if t.prefix == nil || n < 3 || !bytes.HasPrefix(data, t.prefix) || !bytes.HasSuffix(data, t.suffix) {
		return false
	}
	s := scanner{b: data[:len(data)-len(t.suffix)], i: len(t.prefix)}
	v, err := s.str()
	if err != nil || s.i != len(s.b) || len(v) == 0 {
		return false
	}
	*c = chunk{token: true}
	c.setText(v, s.i)
	return true
}

// nonEmptyArray steps over an array (or null) and says whether it held
// anything.
func (s *scanner) nonEmptyArray() (bool, error) {
	if s.lit("null") {
		return false, nil
	}
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return false, s.skip(3)
	}
	start := s.i
	if err := s.skip(3); err != nil {
		return false, err
	}
	inner := bytes.TrimSpace(s.b[start+1 : s.i-1])
	return len(inner) > 0, nil
}

func (s *scanner) usage(c *chunk) error {
	if s.lit("null") {
		return nil
	}
	if !s.eat('{') {
		return errSyntax
	}
	c.hasUsage = true
	for first := true; ; first = false {
		s.ws()
		if s.eat('}') {
			return nil
		}
		if !first && !s.eatComma() {
			return errSyntax
		}
		key, err := s.key()
		if err != nil {
			return err
		}
		switch string(key) {
		case "completion_tokens":
			c.completionTokens, err = s.intValue()
		case "prompt_tokens":
			c.promptTokens, err = s.intValue()
		default:
			err = s.skip(1)
		}
		if err != nil {
			return err
		}
	}
}

// errorField reads OpenAI's {"error": {"message": …}} (or a bare string).
func (s *scanner) errorField(c *chunk) error {
	if s.lit("null") {
		return nil
	}
	if s.i < len(s.b) && s.b[s.i] == '"' {
		v, err := s.str()
		c.errMsg = unquote(v)
		if c.errMsg == "" {
			c.errMsg = "server reported an error"
		}
		return err
	}
	start := s.i
	if err := s.skip(1); err != nil {
		return err
	}
	c.errMsg = errorMessage(s.b[start:s.i])
	if c.errMsg == "" {
		c.errMsg = "server reported an error"
	}
	return nil
}

// unquote decodes a raw JSON string body; errors are rare, so it may allocate.
func unquote(raw []byte) string {
	if raw == nil {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw)
	}
	var out string
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	if err := json.Unmarshal(quoted, &out); err != nil {
		return string(raw)
	}
	return out
}

// errorMessage pulls the human message out of an error body in any of the
// shapes OpenAI-compatible servers use; "" when there is none.
func errorMessage(body []byte) string {
	var v struct {
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if len(v.Error) > 0 {
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(v.Error, &inner) == nil && inner.Message != "" {
			return inner.Message
		}
		var s string
		if json.Unmarshal(v.Error, &s) == nil && s != "" {
			// {"error":"Not Found","message":"Cannot POST /v1/completions"}:
			// the string is the status's name, the message says what failed.
			if v.Message != "" {
				return v.Message
			}
			return s
		}
	}
	if v.Message != "" {
		return v.Message
	}
	if len(v.Detail) > 0 {
		var s string
		if json.Unmarshal(v.Detail, &s) == nil {
			return s
		}
		return string(v.Detail)
	}
	return ""
}

// malformed describes a bad SSE line for the request's error. It names the
// fault, not the line's bytes, so one broken server yields one row in the
// error table rather than one per request.
func malformed(err error) string {
	return fmt.Sprintf("malformed SSE line: %v", err)
}
