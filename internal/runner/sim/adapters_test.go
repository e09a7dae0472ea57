package sim

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Two models on one engine: /v1/models lists both, a request may name
// either (the answer says which), another name is refused as vLLM refuses
// it, and an adapter's prompts never take the base model's cached blocks.
func TestLoRAModulesServeSeveralModels(t *testing.T) {
	cfg := zeroConfig()
	cfg.LoRAModules = "sql-adapter, chat-adapter"
	trace := &syncBuffer{}
	cfg.Trace = trace
	e, ts := startEngine(t, cfg)

	var list struct {
		Data []struct {
			ID     string  `json:"id"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	decodeBody(t, resp, &list)
	if len(list.Data) != 3 || list.Data[0].ID != cfg.Model || list.Data[0].Parent != nil || list.Data[1].ID != "sql-adapter" ||
		list.Data[2].Parent == nil || *list.Data[2].Parent != cfg.Model {
		t.Errorf("/v1/models = %+v; want the model, then both adapters with it as parent", list.Data)
	}

	prompt := words(320, 5)
	ask := func(model, id string) string {
		return complete(t, ts.URL, fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":2}`, model, prompt), "X-Request-Id", id)
	}
	ask(cfg.Model, "base")
	ask(cfg.Model, "base-again")
	if out := ask("sql-adapter", "sql"); !strings.Contains(out, `"model":"sql-adapter"`) {
		t.Errorf("the answer to the adapter names %s", out)
	}
	ask("sql-adapter", "sql-again")
	ask("chat-adapter", "chat")
	bad := post(t, testCtx(t), ts.URL+"/v1/completions", `{"model":"nope","prompt":"a b","max_tokens":1}`)
	bad.Body.Close()
	if bad.StatusCode != http.StatusNotFound {
		t.Errorf("unknown model: status %d, want 404", bad.StatusCode)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// 304 = the 320-token prompt's full 16-token blocks less the last
	// token, which is always computed.
	want := map[string]int{"base": 0, "base-again": 304, "sql": 0, "sql-again": 304, "chat": 0}
	for _, r := range trace.records(t) {
		if w, ok := want[r.RequestID]; ok && r.CachedTokens != w {
			t.Errorf("%s: cached %d tokens, want %d", r.RequestID, r.CachedTokens, w)
		}
	}

	cfg.LoRAModules = "a," + cfg.Model
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Errorf("an adapter named as the model: %v", err)
	}
}
