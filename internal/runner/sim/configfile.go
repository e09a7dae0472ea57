package sim

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/perfgate/perfgate/internal/vocab/suggest"
)

// LoadConfigFile reads a sim config file (a flat YAML mapping of knob keys,
// e.g. a repository's inference_engine/sim.yaml) onto DefaultConfig and
// validates the result. An engine started from a pull request's checkout
// with it measures the pull request's own knobs.
func LoadConfigFile(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read sim config: %w", err)
	}
	cfg, err := ParseConfig(path, data, DefaultConfig())
	if err != nil {
		return Config{}, err
	}
	if err := cfg.validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes a sim config file onto base without validating it
// (flags may still change it). Every key must be a knob; every error names
// the file, line and column, and all of them are reported at once.
func ParseConfig(filename string, data []byte, base Config) (Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Config{}, fmt.Errorf("%s: %w", filename, err)
	}
	if len(root.Content) == 0 {
		return base, nil
	}
	doc := root.Content[0]
	if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
		return base, nil
	}
	if doc.Kind != yaml.MappingNode {
		return Config{}, fmt.Errorf("%s:%d:%d: a sim config is a mapping of knobs (decode_step: 8ms, …), not a %s", filename, doc.Line, doc.Column, kindName(doc))
	}
	byKey := map[string]knob{}
	for _, k := range knobs {
		byKey[k.key()] = k
	}
	var errs []string
	at := func(n *yaml.Node, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s:%d:%d: %s", filename, n.Line, n.Column, fmt.Sprintf(format, args...)))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		kn, vn := doc.Content[i], doc.Content[i+1]
		if line, dup := seen[kn.Value]; dup {
			at(kn, "%q is already set on line %d", kn.Value, line)
			continue
		}
		seen[kn.Value] = kn.Line
		k, ok := byKey[kn.Value]
		if !ok {
			hint := ""
			if s := suggest.Closest(kn.Value, KnobKeys()); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
			}
			at(kn, "unknown key %q%s; the keys are %s", kn.Value, hint, strings.Join(KnobKeys(), ", "))
			continue
		}
		if msg := decodeKnob(vn, k.field(&base)); msg != "" {
			at(vn, "%s: %s", kn.Value, msg)
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.New(strings.Join(errs, "\n"))
	}
	return base, nil
}

// decodeKnob decodes a scalar into the field p points to; it returns what
// is wrong, or "".
func decodeKnob(n *yaml.Node, p any) string {
	if n.Kind != yaml.ScalarNode {
		return fmt.Sprintf("want a single value, got a %s", kindName(n))
	}
	if n.Tag == "!!null" {
		return "needs a value"
	}
	switch p := p.(type) {
	case *time.Duration:
		if n.Tag != "!!str" {
			return fmt.Sprintf("%s has no unit: write a duration such as 8ms, 20us or 1.5s", n.Value)
		}
		d, err := time.ParseDuration(n.Value)
		if err != nil {
			return fmt.Sprintf("%q is not a duration: write one such as 8ms, 20us or 1.5s", n.Value)
		}
		*p = d
	case *string:
		if n.Tag != "!!str" {
			return fmt.Sprintf("want a string, got %s", n.Value)
		}
		*p = n.Value
	case *int, *int64:
		if n.Tag != "!!int" || n.Decode(p) != nil {
			return fmt.Sprintf("want an integer, got %q", n.Value)
		}
	case *float64:
		if (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(p) != nil {
			return fmt.Sprintf("want a number, got %q", n.Value)
		}
	case *bool:
		if n.Tag != "!!bool" || n.Decode(p) != nil {
			return fmt.Sprintf("want true or false, got %q", n.Value)
		}
	}
	return ""
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "scalar"
}
