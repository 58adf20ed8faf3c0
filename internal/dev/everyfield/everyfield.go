// Package everyfield holds round-trip tests to every field of a type,
// present and future: Fill gives each field a value of its own, none zero,
// and Diff names each field that did not come back. A field added to a
// persisted type without its way to disk and back fails the round trip
// that Fill and Diff make of it, without anyone writing a line for it.
package everyfield

import (
	"fmt"
	"reflect"
	"time"
)

var timeType = reflect.TypeFor[time.Time]()

// Fill sets every field reachable from ptr (a pointer to a struct, most
// often) to a non-zero value that no other field of it gets: strings name
// their field, numbers count, pointers, slices and maps get filled
// elements, times are distinct instants in UTC. It panics on what it
// cannot fill (an unexported field, an interface, a channel, a func): a
// type that holds one needs its own round trip.
func Fill(ptr any) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic("everyfield.Fill: not a pointer")
	}
	n := 0
	fill(v.Elem(), typeName(v.Elem().Type()), &n)
}

func fill(v reflect.Value, path string, n *int) {
	*n++
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, *n, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				panic(fmt.Sprintf("everyfield.Fill: %s.%s is unexported", path, f.Name))
			}
			fill(v.Field(i), path+"."+f.Name, n)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path, n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), fmt.Sprintf("%s[%d]", path, i), n)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, path+"[key]", n)
		fill(e, path+"[value]", n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d", path, *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.25)
	default:
		panic(fmt.Sprintf("everyfield.Fill: %s is a %s", path, v.Kind()))
	}
}

// Diff names, by their path from the top (Session.Run.Commit), the fields
// whose values differ between want and got, of the same type. Times are
// equal when they are the same instant.
func Diff(want, got any) []string {
	w, g := reflect.ValueOf(want), reflect.ValueOf(got)
	if w.Type() != g.Type() {
		return []string{fmt.Sprintf("want a %s, got a %s", w.Type(), g.Type())}
	}
	var out []string
	diff(w, g, typeName(w.Type()), &out)
	return out
}

// typeName is a type's name, or its elements' for a slice or map of them:
// Run[1].CostUSD reads better than [1].CostUSD.
func typeName(t reflect.Type) string {
	for t.Name() == "" && (t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Pointer) {
		t = t.Elem()
	}
	return t.Name()
}

func diff(w, g reflect.Value, path string, out *[]string) {
	if w.Type() == timeType {
		if wt, gt := w.Interface().(time.Time), g.Interface().(time.Time); !wt.Equal(gt) {
			*out = append(*out, fmt.Sprintf("%s: want %s, got %s", path, wt, gt))
		}
		return
	}
	switch w.Kind() {
	case reflect.Struct:
		for i := range w.NumField() {
			if w.Type().Field(i).IsExported() {
				diff(w.Field(i), g.Field(i), path+"."+w.Type().Field(i).Name, out)
			}
		}
		return
	case reflect.Pointer:
		if !w.IsNil() && !g.IsNil() {
			diff(w.Elem(), g.Elem(), path, out)
			return
		}
	case reflect.Slice:
		if w.Len() == g.Len() && w.Type().Elem().Kind() != reflect.Uint8 {
			for i := range w.Len() {
				diff(w.Index(i), g.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
			}
			return
		}
	case reflect.Map:
		if w.Len() == g.Len() {
			for _, k := range w.MapKeys() {
				if gv := g.MapIndex(k); gv.IsValid() {
					diff(w.MapIndex(k), gv, fmt.Sprintf("%s[%v]", path, k), out)
				} else {
					*out = append(*out, fmt.Sprintf("%s[%v]: missing", path, k))
				}
			}
			return
		}
	}
	if !reflect.DeepEqual(w.Interface(), g.Interface()) {
		*out = append(*out, fmt.Sprintf("%s: want %v, got %v", path, w, g))
	}
}
