package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// EndpointOllama is Ollama's native generate API (--backend ollama). Its
// stream is one JSON object a line, and its last line carries the
// engine's own clock for the request (load_duration, prompt_eval_count,
// prompt_eval_duration, eval_count, eval_duration, total_duration), which
// the OpenAI-compatible endpoints drop: with it, the client's TTFT and
// TPOT stand beside the engine's for the same requests (result's
// EngineClock).
const EndpointOllama = "/api/generate"

// nativePayload is an /api/generate request. The model's template
// applies as it does on Ollama's /v1/completions (raw is not set), so a
// prompt costs the same tokens on either endpoint; max tokens and the
// temperature go in options.
type nativePayload struct {
	Model   string        `json:"model"`
	Prompt  string        `json:"prompt"`
	Stream  bool          `json:"stream"`
	Options nativeOptions `json:"options"`
}

type nativeOptions struct {
	NumPredict  int     `json:"num_predict"`
	Temperature float64 `json:"temperature"`
}

// nativeLine is one line of the native stream, or its whole answer.
type nativeLine struct {
	// CreatedAt is when Ollama's server stamped the line: as it took the
	// token from its runner process, before the HTTP hop to the client.
	CreatedAt          time.Time `json:"created_at"`
	Response           string    `json:"response"`
	Done               bool      `json:"done"`
	Error              string    `json:"error"`
	LoadDuration       int64     `json:"load_duration"`
	PromptEvalCount    int       `json:"prompt_eval_count"`
	PromptEvalDuration int64     `json:"prompt_eval_duration"`
	EvalCount          int       `json:"eval_count"`
	EvalDuration       int64     `json:"eval_duration"`
	TotalDuration      int64     `json:"total_duration"`
}

// engineClock is what the engine timed of one request.
type engineClock struct {
	load, promptEval, eval, total time.Duration
	promptCount, evalCount        int
}

func (q *requester) nativeBody(req request) ([]byte, error) {
	if req.messages != nil {
		return nil, errors.New("the native " + EndpointOllama + " takes one prompt, not a conversation: use --backend openai-chat for chat sessions")
	}
	p := nativePayload{Model: q.model, Prompt: req.prompt, Stream: q.stream,
		Options: nativeOptions{NumPredict: req.maxTokens, Temperature: q.temperature}}
	if req.model != "" {
		p.Model = req.model
	}
	return json.Marshal(p)
}

// readNative consumes the native stream into rec, as readStream does an
// SSE one: a line with a non-empty response is a token event, the line
// with done ends the answer and holds the engine's clock. Lines are
// decoded with encoding/json (a few microseconds each, against
// milliseconds per token on the engines that speak this API).
func readNative(br *bufio.Reader, rec *record, st time.Time, wd *watchdog, capture bool, maxLine int) (done bool, rerr error) {
	var (
		now      time.Time
		last     time.Time
		lastAt   time.Time // the engine's stamp of the last token
		scratch  []byte
		buffered int
	)
	for {
		buffered = br.Buffered()
		line, err := readLine(br, &scratch, maxLine)
		if errors.Is(err, errLineTooLong) {
			rec.err = fmt.Sprintf("stream line longer than %d bytes: request abandoned (raise --max-line-bytes)", maxLine)
			return false, nil
		}
		if len(trimSpace(line)) > 0 {
			// As in readStream: a line already buffered keeps the
			// instant of the read that brought it.
			if len(line) >= buffered || now.IsZero() {
				now = time.Now()
				if wd != nil {
					wd.touch(now)
				}
			}
			var l nativeLine
			if jerr := json.Unmarshal(line, &l); jerr != nil {
				rec.err = fmt.Sprintf("malformed stream line: %v", jerr)
				return false, nil
			}
			if l.Error != "" {
				rec.err = errInStream + l.Error
				return false, nil
			}
			if l.Response != "" {
				if rec.chunks == 0 {
					rec.ttft = now.Sub(st).Seconds()
				} else {
					rec.itl = append(rec.itl, now.Sub(last).Seconds())
				}
				if !l.CreatedAt.IsZero() {
					if !lastAt.IsZero() {
						rec.engineITL = append(rec.engineITL, l.CreatedAt.Sub(lastAt).Seconds())
					}
					lastAt = l.CreatedAt
				}
				rec.chunks++
				last = now
				rec.latency = now.Sub(st).Seconds()
				if capture {
					rec.text = appendQuoted(rec.text, l.Response)
				}
			}
			if l.Done {
				rec.finished = true
				takeClock(rec, &l)
				return true, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// takeClock records the counts and durations of the native answer's last
// line: eval_count is the output length (usage), and the durations are
// the engine's own clock.
func takeClock(rec *record, l *nativeLine) {
	if l.EvalCount <= 0 {
		return
	}
	rec.usage = true
	rec.usageOut = l.EvalCount
	rec.usagePrompt = l.PromptEvalCount
	rec.engine = &engineClock{
		load: time.Duration(l.LoadDuration), promptEval: time.Duration(l.PromptEvalDuration),
		eval: time.Duration(l.EvalDuration), total: time.Duration(l.TotalDuration),
		promptCount: l.PromptEvalCount, evalCount: l.EvalCount,
	}
}

// appendQuoted appends s JSON-escaped without its quotes: rec.text holds
// the OpenAI stream's raw (escaped) text, and unquote reads it back.
func appendQuoted(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b[1:len(b)-1]...)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
