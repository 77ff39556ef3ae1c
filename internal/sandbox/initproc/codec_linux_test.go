package initproc

import (
	"reflect"
	"testing"
)

// fill sets every field reachable from v to a value that is not its zero,
// distinct per field (n counts up), with two elements in each slice and
// a value behind each pointer: a field the codec leaves out then decodes
// to its zero and fails the comparison.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)) + string(rune('A'+*n/26%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n) * -1000003)
	case reflect.Uint64:
		v.SetUint(uint64(*n) << 40)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.Uint8:
		v.SetUint(uint64(*n))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	default:
		panic("fill: add " + v.Kind().String())
	}
}

func TestCodecRoundTrip(t *testing.T) {
	var c initConfig
	var n int
	fill(reflect.ValueOf(&c).Elem(), &n)
	b := encodeConfig(&c)
	got, err := decodeConfig(b)
	if err != nil {
		t.Fatalf("decodeConfig: %v", err)
	}
	if !reflect.DeepEqual(got, &c) {
		t.Errorf("config round trip:\n got %+v\nwant %+v", got, &c)
	}
	for i := range len(b) {
		if _, err := decodeConfig(b[:i]); err == nil {
			t.Fatalf("decodeConfig of the first %d of %d bytes: no error", i, len(b))
		}
	}
	if _, err := decodeConfig(append(b, 0)); err == nil {
		t.Error("decodeConfig with a trailing byte: no error")
	}

	var zero initConfig // nil slices and pointers stay nil
	if got, err := decodeConfig(encodeConfig(&zero)); err != nil || !reflect.DeepEqual(got, &zero) {
		t.Errorf("empty config round trip: %+v, %v", got, err)
	}

	var r initReport
	fill(reflect.ValueOf(&r).Elem(), &n)
	rb := encodeReport(&r)
	gr, err := decodeReport(rb)
	if err != nil || !reflect.DeepEqual(gr, &r) {
		t.Errorf("report round trip: got %+v, %v; want %+v", gr, err, &r)
	}
	for i := range len(rb) {
		if _, err := decodeReport(rb[:i]); err == nil {
			t.Fatalf("decodeReport of the first %d of %d bytes: no error", i, len(rb))
		}
	}
}

// TestCodecLengthBound: a length beyond the message is an error, not an
// allocation of that size.
func TestCodecLengthBound(t *testing.T) {
	e := &encoder{}
	e.uint(1 << 40) // the hostname's length
	if _, err := decodeConfig(e.b); err == nil {
		t.Error("decodeConfig with a length past the end: no error")
	}
}
