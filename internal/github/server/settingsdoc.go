package server

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// SettingsMarkdown renders Settings as the markdown table of
// docs/operations.md, followed by the server.yml keys no variable sets.
// The page carries it between markers and a test in docs/ compares them,
// so the manual cannot drift from what `perfgate serve -h` prints.
func SettingsMarkdown() string {
	var b strings.Builder
	b.WriteString("| key (`server.yml`) | variable | what, and the default |\n")
	b.WriteString("|---|---|---|\n")
	for _, s := range Settings {
		env := "`" + s.Env + "`"
		if s.Secret {
			env += " (or `" + s.Env + "_FILE`)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Key, env, cell(s.Help))
	}
	if keys := FileOnlyKeys(); len(keys) > 0 {
		b.WriteString("\nKeys only `server.yml` sets (no variable): `")
		b.WriteString(strings.Join(keys, "`, `"))
		b.WriteString("`.\n")
	}
	return b.String()
}

// FileOnlyKeys lists the server.yml keys, dotted, that Config accepts and
// no Setting reads from the environment, sorted.
func FileOnlyKeys() []string {
	inSettings := map[string]bool{}
	for _, s := range Settings {
		inSettings[s.Key] = true
	}
	var keys []string
	for _, k := range yamlLeaves(reflect.TypeOf(Config{}), "") {
		if !inSettings[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// yamlLeaves walks a struct's yaml keys as loadFile decodes them: nested
// structs are sections, everything else (maps and durations included) is
// one key.
func yamlLeaves(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && tag == "" {
			keys = append(keys, yamlLeaves(ft, prefix)...)
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		if ft.Kind() == reflect.Struct {
			keys = append(keys, yamlLeaves(ft, prefix+tag+".")...)
			continue
		}
		keys = append(keys, prefix+tag)
	}
	return keys
}

// cell makes text safe inside one markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
