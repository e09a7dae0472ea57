package bench

import (
	"bufio"
	"strings"
	"testing"
)

// chunkView is a chunk with its text as a string, so tests can compare.
type chunkView struct {
	token            bool
	text             string
	hasUsage         bool
	completionTokens int
	promptTokens     int
	errMsg           string
}

func view(c chunk) chunkView {
	return chunkView{c.token, string(c.text), c.hasUsage, c.completionTokens, c.promptTokens, c.errMsg}
}

func TestParseChunk(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    chunkView
		wantErr bool
	}{
		{name: "chat token", in: `{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi "},"logprobs":null,"finish_reason":null}]}`,
			want: chunkView{token: true, text: "hi "}},
		{name: "chat role only", in: `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`},
		{name: "chat finish only", in: `{"choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":null}]}`},
		{name: "chat null content", in: `{"choices":[{"index":0,"delta":{"content":null}}]}`},
		{name: "chat escaped content", in: `{"choices":[{"delta":{"content":"\"\\n\u00e9"}}]}`, want: chunkView{token: true, text: `\"\\n\u00e9`}},
		// Reasoning models stream their thinking before any content;
		// vLLM's client counts it, and so does perfgate.
		{name: "reasoning_content", in: `{"choices":[{"index":0,"delta":{"reasoning_content":"Let me think"}}]}`,
			want: chunkView{token: true, text: "Let me think"}},
		{name: "reasoning (newer name)", in: `{"choices":[{"index":0,"delta":{"content":null,"reasoning":"hmm"}}]}`,
			want: chunkView{token: true, text: "hmm"}},
		{name: "tool call delta", in: `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}]}`,
			want: chunkView{token: true}},
		{name: "empty tool calls", in: `{"choices":[{"index":0,"delta":{"tool_calls":[ ]}}]}`},
		{name: "completions token", in: `{"choices":[{"index":0,"text":"word ","logprobs":null,"finish_reason":null,"stop_reason":null}]}`,
			want: chunkView{token: true, text: "word "}},
		{name: "completions empty text", in: `{"choices":[{"text":""}]}`},
		{name: "only first choice counts", in: `{"choices":[{"text":""},{"text":"x"}]}`},
		{name: "usage", in: `{"id":"x","choices":[],"usage":{"prompt_tokens":12,"total_tokens":19,"completion_tokens":7}}`,
			want: chunkView{hasUsage: true, completionTokens: 7, promptTokens: 12}},
		{name: "usage null", in: `{"choices":[{"delta":{"content":"a"}}],"usage":null}`, want: chunkView{token: true, text: "a"}},
		{name: "openai error", in: `{"error":{"message":"engine died","type":"ServiceUnavailableError","code":503}}`,
			want: chunkView{errMsg: "engine died"}},
		{name: "vllm old error", in: `{"object":"error","message":"bad \"thing\"","type":"BadRequestError","code":400}`,
			want: chunkView{errMsg: `bad "thing"`}},
		{name: "string error beside a message", in: `{"error":"Not Found","message":"Cannot POST /v1/completions","statusCode":404}`,
			want: chunkView{errMsg: "Cannot POST /v1/completions"}},
		{name: "nested unknown", in: `{"x":{"a":[1,2,{"b":true}],"c":-1.5e3},"choices":[{"delta":{"tool_calls":[{"id":"t"}],"content":"y"}}]}`,
			want: chunkView{token: true, text: "y"}},
		{name: "not json", in: `hello`, wantErr: true},
		{name: "truncated", in: `{"choices":[{"delta":{"content":"a`, wantErr: true},
		{name: "trailing garbage", in: `{"choices":[]} x`, wantErr: true},
		{name: "missing comma", in: `{"a":1 "b":2}`, wantErr: true},
		{name: "array top level", in: `[1,2]`, wantErr: true},
		{name: "bad literal", in: `{"a":nul}`, wantErr: true},
		{name: "bad tool calls", in: `{"choices":[{"delta":{"tool_calls":[1,}}]}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c chunk
			err := parseChunk([]byte(tt.in), &c)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseChunk(%s) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err == nil && view(c) != tt.want {
				t.Errorf("parseChunk(%s) = %+v, want %+v", tt.in, view(c), tt.want)
			}
		})
	}
}

func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 10000)
	in := "data: a\r\n\nb\n" + long + "\nlast"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	var scratch []byte
	var got []string
	for {
		line, err := readLine(br, &scratch, 0)
		got = append(got, string(line))
		if err != nil {
			break
		}
	}
	want := []string{"data: a", "", "b", long, "last"}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %.20q, want %.20q", i, got[i], want[i])
		}
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"error":{"message":"model not found","type":"NotFoundError","code":404}}`, "model not found"},
		{`{"object":"error","message":"too long","type":"BadRequestError","code":400}`, "too long"},
		{`{"detail":"Not Found"}`, "Not Found"},
		{`{"error":"overloaded"}`, "overloaded"},
		{`{"error":"Not Found","message":"Cannot POST /v1/completions","statusCode":404}`, "Cannot POST /v1/completions"},
		{`<html>oops</html>`, ""},
	}
	for _, tt := range tests {
		if got := errorMessage([]byte(tt.body)); got != tt.want {
			t.Errorf("errorMessage(%s) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

// The template fast path must say exactly what the full parse says, or
// step aside: learnt from one chunk, it is checked against many.
func TestTemplateAgreesWithParse(t *testing.T) {
	const pre = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":`
	const post = `},"logprobs":null,"finish_reason":null}]}`
	for _, base := range []string{pre + `"hello"` + post, `{"id":"c","choices":[{"index":0,"text":"hello","logprobs":null,"finish_reason":null}]}`} {
		var tpl template
		var c chunk
		if err := parseChunk([]byte(base), &c); err != nil {
			t.Fatal(err)
		}
		tpl.learn([]byte(base), &c)
		if tpl.prefix == nil {
			t.Fatalf("no template learnt from %s", base)
		}
		at := strings.Index(base, `"hello"`)
		for _, tc := range []struct {
			text  string
			match bool
		}{
			{`"w "`, true},
			{`"a \"quoted\" word"`, true},
			{`"back\\slash\\"`, true},
			{`"\u00e9t\u00e9"`, true},
			{`""`, false},             // empty text: not a token, full parse decides
			{`"a"b"`, false},          // two strings: malformed
			{`"open`, false},          // unterminated
			{`null`, false},           // not a string
			{`"x","role":"a"`, false}, // more than a string: the full parse decides
		} {
			data := []byte(base[:at] + tc.text + base[at+len(`"hello"`):])
			var fast, full chunk
			ok := tpl.match(data, &fast)
			if ok != tc.match {
				t.Errorf("%s: match %v, want %v", data, ok, tc.match)
			}
			err := parseChunk(data, &full)
			if ok && (err != nil || view(fast) != view(full)) {
				t.Errorf("%s: fast path %+v, full parse %+v (%v)", data, view(fast), view(full), err)
			}
		}
		// Different bytes around the text: the template steps aside.
		var c2 chunk
		if tpl.match([]byte(strings.Replace(base, `"index":0`, `"index":1`, 1)), &c2) {
			t.Errorf("matched a payload with a different prefix")
		}
	}
	// A usage chunk or an error teaches nothing.
	var tpl template
	var c chunk
	usage := `{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}`
	_ = parseChunk([]byte(usage), &c)
	tpl.learn([]byte(usage), &c)
	if tpl.prefix != nil {
		t.Errorf("learnt a template from a usage chunk")
	}
}

// FuzzTemplate: whenever the fast path accepts a payload, the full parse
// accepts it too and reads the same.
func FuzzTemplate(f *testing.F) {
	const base = `{"id":"x","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}`
	for _, s := range []string{`"w"`, `"\""`, `"\\"`, `"a\\\"b"`, `"é"`, `""`, `"a"b"`} {
		f.Add(s)
	}
	var tpl template
	var c chunk
	if err := parseChunk([]byte(base), &c); err != nil {
		f.Fatal(err)
	}
	tpl.learn([]byte(base), &c)
	at := strings.Index(base, `"hello"`)
	f.Fuzz(func(t *testing.T, text string) {
		data := []byte(base[:at] + text + base[at+len(`"hello"`):])
		var fast, full chunk
		if !tpl.match(data, &fast) {
			return
		}
		if err := parseChunk(data, &full); err != nil || view(fast) != view(full) {
			t.Errorf("%s: fast %+v, full %+v (%v)", data, view(fast), view(full), err)
		}
	})
}
