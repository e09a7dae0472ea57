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
