package sim

import (
	"fmt"
	"strings"
)

// Several models on one engine, as vLLM serves LoRA adapters beside its
// base model (--enable-lora --lora-modules name=path): a request names any
// of them in its model field, all share the engine, its batch and its KV
// cache, and each adapter's prompts hash into a prefix-cache namespace of
// their own (vLLM keys a block by its LoRA too), so the same prompt sent
// to two models is computed twice.

// adapterNames splits Config.LoRAModules ("a,b") into names.
func adapterNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// validateAdapters reports an adapter named twice or named as the model.
func validateAdapters(c Config) error {
	seen := map[string]bool{c.Model: true}
	for _, n := range adapterNames(c.LoRAModules) {
		if seen[n] {
			return fmt.Errorf("lora module %q is named twice (or is the model itself): give each model one name", n)
		}
		seen[n] = true
	}
	return nil
}

// modelsJSON pre-encodes every served name for the stream chunks.
func modelsJSON(c Config) map[string][]byte {
	out := map[string][]byte{c.Model: jsonString(c.Model)}
	for _, n := range adapterNames(c.LoRAModules) {
		out[n] = jsonString(n)
	}
	return out
}

// adapterSalt is where a request's prefix-cache namespace starts: the
// base model's requests keep their cache_salt as sent; an adapter's add
// the adapter's name to it.
func (e *Engine) adapterSalt(model, salt string) string {
	if model == "" || model == e.cfg.Model {
		return salt
	}
	return "lora:" + model + "\x00" + salt
}
