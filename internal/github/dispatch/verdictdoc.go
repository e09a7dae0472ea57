package dispatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/perfgate/perfgate/internal/analysis/gate"
)

type reportT = gate.Report

// encodeDoc encodes a verdict document for the store. JSON has no NaN or
// infinity; a report carrying one (a statistic of a degenerate sample) is
// stored with those numbers as 0 and a note saying so, rather than losing
// the verdict or leaving the check open. The caller renders the check from
// the document as it was.
func encodeDoc(doc verdictDoc) (json.RawMessage, bool, error) {
	raw, err := json.Marshal(doc)
	var unsupported *json.UnsupportedValueError
	if err == nil || !errors.As(err, &unsupported) {
		return raw, false, err
	}
	clean := doc
	if doc.Report != nil {
		r := deepCopy(reflect.ValueOf(doc.Report).Elem())
		scrub(r)
		rep := r.Addr().Interface()
		clean.Report = rep.(*reportT)
	}
	clean.Notes = append(append([]string{}, doc.Notes...), "some statistics were not finite numbers and are stored as 0")
	raw, err = json.Marshal(clean)
	if err != nil {
		return nil, true, fmt.Errorf("encode verdict: %w", err)
	}
	return raw, true, nil
}

// deepCopy returns an addressable deep copy of v.
func deepCopy(v reflect.Value) reflect.Value {
	out := reflect.New(v.Type()).Elem()
	copyInto(out, v)
	return out
}

func copyInto(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyInto(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Struct:
		for i := range src.NumField() {
			if dst.Field(i).CanSet() {
				copyInto(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			copyInto(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		for _, k := range src.MapKeys() {
			e := reflect.New(src.Type().Elem()).Elem()
			copyInto(e, src.MapIndex(k))
			m.SetMapIndex(k, e)
		}
		dst.Set(m)
	default:
		dst.Set(src)
	}
}

// scrub sets every NaN or infinite float in v (settable) to 0.
func scrub(v reflect.Value) {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			v.SetFloat(0)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			scrub(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				scrub(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			scrub(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			scrub(e)
			v.SetMapIndex(k, e)
		}
	}
}
