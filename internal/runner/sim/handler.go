package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// maxBody bounds a request body; long-context benchmarks send a few MiB.
const maxBody = 32 << 20

var errDisconnected = errors.New("client disconnected")

// routes are the paths the engine serves, for the 405 answer.
var routes = map[string]bool{
	"/v1/chat/completions": true, "/v1/completions": true, "/v1/models": true, "/health": true,
	"/tokenize": true, "/detokenize": true, "/metrics": true, "/start_profile": true, "/stop_profile": true,
	"/version": true,
}

// Handler serves vLLM's OpenAI-compatible API: /v1/chat/completions,
// /v1/completions, /v1/models, /tokenize, /detokenize, /metrics,
// /start_profile, /stop_profile, /health and /version (vLLM's shape, plus
// an "engine" field naming the sim, so a runner never takes it for vLLM).
func (e *Engine) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { e.serveGenerate(w, r, true) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { e.serveGenerate(w, r, false) })
	mux.HandleFunc("GET /v1/models", e.serveModels)
	mux.HandleFunc("POST /tokenize", e.serveTokenize)
	mux.HandleFunc("POST /detokenize", e.serveDetokenize)
	mux.Handle("GET /metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	mux.HandleFunc("POST /start_profile", e.serveStartProfile)
	mux.HandleFunc("POST /stop_profile", e.serveStopProfile)
	mux.HandleFunc("GET /health", e.serveHealth)
	mux.HandleFunc("GET /version", serveVersion)
	mux.HandleFunc("/", serveFallback)
	return mux
}

var errorTypes = map[int]string{
	http.StatusBadRequest:          "BadRequestError",
	http.StatusNotFound:            "NotFoundError",
	http.StatusMethodNotAllowed:    "MethodNotAllowed",
	http.StatusInternalServerError: "InternalServerError",
	http.StatusServiceUnavailable:  "ServiceUnavailableError",
}

// errorBody is vLLM's error object, pre-rendered: json.Marshal of strings
// and ints cannot fail.
func errorBody(status int, msg string) []byte {
	b := []byte(`{"error":{"message":`)
	b = append(b, jsonString(msg)...)
	b = append(b, `,"type":`...)
	b = append(b, jsonString(errorTypes[status])...)
	b = append(b, `,"param":null,"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	return append(b, "}}"...)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(errorBody(status, msg), '\n'))
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(body, '\n'))
}

func serveFallback(w http.ResponseWriter, r *http.Request) {
	if routes[r.URL.Path] {
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
		return
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
}

// serveVersion answers vLLM's GET /version with perfgate's module version.
func serveVersion(w http.ResponseWriter, _ *http.Request) {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"version":%q,"engine":"perfgate-sim"}`, v)
}

func (e *Engine) serveHealth(w http.ResponseWriter, _ *http.Request) {
	if !e.ready() {
		writeError(w, http.StatusServiceUnavailable, "engine is not ready")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// serveModels lists the one model as vLLM does, max_model_len included.
// Adapters follow it, their parent the model, as vLLM lists LoRA modules.
func (e *Engine) serveModels(w http.ResponseWriter, _ *http.Request) {
	created := e.start.Unix()
	entry := func(id string, parent any) map[string]any {
		return map[string]any{
			"id": id, "object": "model", "created": created,
			"owned_by": "perfgate", "root": id, "parent": parent, "max_model_len": e.cfg.MaxModelLen,
			"permission": []any{map[string]any{
				"id": "modelperm-" + strconv.FormatInt(e.start.UnixNano(), 36), "object": "model_permission", "created": created,
				"allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true, "allow_search_indices": false,
				"allow_view": true, "allow_fine_tuning": false, "organization": "*", "group": nil, "is_blocking": false,
			}},
		}
	}
	data := []any{entry(e.cfg.Model, nil)}
	for _, n := range adapterNames(e.cfg.LoRAModules) {
		data = append(data, entry(n, e.cfg.Model))
	}
	writeJSON(w, map[string]any{"object": "list", "data": data})
}

// checkModel answers 404 as vLLM does for a model it does not serve; an
// empty name means the served one.
func (e *Engine) checkModel(model string) *apiError {
	if _, ok := e.modelJSON[model]; model != "" && !ok {
		return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("The model `%s` does not exist.", model)}
	}
	return nil
}

// serveGenerate runs one completion request through the engine.
func (e *Engine) serveGenerate(w http.ResponseWriter, r *http.Request, chat bool) {
	arrival := time.Now()
	id := r.Header.Get("X-Request-Id")
	if id == "" {
		id = strconv.FormatInt(e.start.UnixNano(), 36) + "-" + strconv.FormatUint(e.ids.Add(1), 10)
	}
	w.Header().Set("X-Request-Id", id)
	rec := TraceRecord{RequestID: id, ArrivalUnixNS: arrival.UnixNano()}
	if !e.enter() {
		writeError(w, http.StatusServiceUnavailable, errClosed.Error())
		return
	}
	defer e.leave()
	defer e.answer()
	fail := func(status int, msg string) {
		rec.Status, rec.Error = status, msg
		writeError(w, status, msg)
		e.trace.write(rec)
	}
	if !e.ready() {
		fail(http.StatusServiceUnavailable, "engine is not ready")
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	var g genRequest
	var perr *apiError
	if chat {
		g, perr = e.parseChat(body)
	} else {
		g, perr = e.parseCompletion(body)
	}
	if perr == nil {
		perr = e.checkModel(g.model)
	}
	rec.PromptTokens = len(g.prompt)
	if perr != nil {
		fail(perr.status, perr.msg)
		return
	}
	if e.injectError() {
		fail(http.StatusInternalServerError, "simulated engine error (--error-rate)")
		return
	}
	tail := chunkTail{finish: finishLength, stopReason: []byte("null")}
	n := g.maxTokens
	if stopN, text, reason, ok := stopAt(g); ok {
		n = stopN
		tail = chunkTail{finish: finishStop, stopReason: reason, text: text, textSet: true}
	}
	stallAt := 0
	if e.cfg.StallMS > 0 && n >= 2 {
		stallAt = n / 2
	}
	bs := 0
	if e.cfg.PrefixCaching {
		bs = e.cfg.BlockSize
	}
	s := newSeq(g.prompt, n, stallAt, bs, e.adapterSalt(g.model, g.cacheSalt))
	s.arrival = arrival
	s.maxParam = g.maxTokens
	s.stopped = tail.finish == finishStop
	if err := e.submit(s); err != nil {
		fail(http.StatusServiceUnavailable, err.Error())
		return
	}
	reasoning := 0
	if chat {
		reasoning = e.cfg.ReasoningTokens
	}
	out := newChunker(chat, id, arrival.Unix(), e.modelJSON[g.model], n, tail, reasoning, e.cfg.ReasoningField)
	if g.stream {
		err = e.stream(r.Context(), w, s, out, &rec, g.includeUsage)
	} else {
		err = e.complete(r.Context(), w, s, out, &rec)
	}
	switch {
	case err == nil:
		rec.Status = http.StatusOK
		rec.FinishReason = s.finishReason
		rec.CachedTokens = s.cachedTokens
		rec.Preemptions = s.preemptions
		e.leak.request()
	case errors.Is(err, errDisconnected):
		rec.Status, rec.Error = 499, err.Error()
	default:
		rec.Status, rec.Error = http.StatusServiceUnavailable, err.Error()
	}
	if e.onFinish != nil {
		e.onFinish(s)
	}
	e.trace.write(rec)
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= maxBody {
		buf.Grow(int(r.ContentLength))
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBody)); err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return buf.Bytes(), nil
}

// await blocks until the engine has produced more than have tokens for s, the
// client goes away, or the engine closes.
func (e *Engine) await(ctx context.Context, s *seq, have int) (int, error) {
	for {
		if n := int(s.produced.Load()); n > have {
			return n, nil
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			s.cancelled.Store(true)
			return have, errDisconnected
		case <-e.done:
			if n := int(s.produced.Load()); n > have {
				return n, nil
			}
			return have, errClosed
		}
	}
}

// serveStartProfile starts recording scheduler steps, as vLLM's
// /start_profile starts its profiler.
func (e *Engine) serveStartProfile(w http.ResponseWriter, _ *http.Request) {
	e.prof.begin()
	w.WriteHeader(http.StatusOK)
}

// serveStopProfile stops recording and answers the Chrome trace; with a
// profile directory it also writes the file and names it in
// X-Perfgate-Profile-File. vLLM answers an empty 200 and writes its trace
// to VLLM_TORCH_PROFILER_DIR; a vLLM client ignores the body.
func (e *Engine) serveStopProfile(w http.ResponseWriter, _ *http.Request) {
	body, path, err := e.prof.end(e.cfg)
	if errors.Is(err, errNotProfiling) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if path != "" {
		w.Header().Set("X-Perfgate-Profile-File", path)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
