package awsjson

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzSplit checks splitObject and splitArray against encoding/json on every valid JSON
// object and array: the same members (the last of a repeated name) and elements, byte
// for byte. The seeds run with every `go test`.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, ` { } `, `[ ]`,
		`{"cluster":"default","tasks":["a","b"]}`,
		`{"a":1,"a":2}`,
		`{ "a" : { "b" : [1, {"c": "}]\"{["}] } , "d":null,"e":true,"f":-1.5e3 }`,
		`{"\u0061\n":"x","é":"\ud83d\ude00"}`,
		`[1,"two",{"three":[3]},[[]],null,false]`,
		"[\n\t1 ,\r\n 2\n]",
		`{"s":"a\\\"b\\\\"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.TrimSpace(data)
		if !json.Valid(data) || len(data) == 0 {
			return
		}
		switch data[0] {
		case '{':
			var want map[string]json.RawMessage
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			got, err := splitObject(data)
			if err != nil {
				t.Fatalf("splitObject(%q): %v", data, err)
			}
			if len(got) != len(want) {
				t.Fatalf("splitObject(%q) = %q, want %q", data, got, want)
			}
			for k, v := range want {
				if !bytes.Equal(got[k], v) {
					t.Fatalf("splitObject(%q)[%q] = %q, want %q", data, k, got[k], v)
				}
			}
		case '[':
			var want []json.RawMessage
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			got := splitArray(data)
			if len(got) != len(want) {
				t.Fatalf("splitArray(%q) = %q, want %q", data, got, want)
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("splitArray(%q)[%d] = %q, want %q", data, i, got[i], want[i])
				}
			}
		}
	})
}
