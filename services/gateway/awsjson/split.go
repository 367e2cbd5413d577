package awsjson

import (
	"encoding/json"
)

// The decoder walks a request body that json.Valid has already accepted, so its parts
// are split here by scanning for their ends, without encoding/json validating and
// copying every nested value again at each level (a DescribeTasks request of 100 ARNs
// was scanned five times and each ARN copied twice).

// splitObject returns the members of raw, a valid JSON object, as name → value (a
// sub-slice of raw); a name given twice keeps its last value, as encoding/json does.
func splitObject(raw []byte) (map[string]json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	i := skipSpace(raw, 1)
	if i < len(raw) && raw[i] == '}' {
		return obj, nil
	}
	for i < len(raw) {
		end := stringEnd(raw, i)
		name, ok := plainString(raw[i:end])
		if !ok {
			if err := json.Unmarshal(raw[i:end], &name); err != nil {
				return nil, err
			}
		}
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // the colon
		end = valueEnd(raw, i)
		obj[name] = raw[i:end:end]
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] == '}' {
			break
		}
		i = skipSpace(raw, i+1) // the comma
	}
	return obj, nil
}

// splitArray returns the elements of raw, a valid JSON array, as sub-slices of raw.
func splitArray(raw []byte) []json.RawMessage {
	var elems []json.RawMessage
	i := skipSpace(raw, 1)
	if i < len(raw) && raw[i] == ']' {
		return elems
	}
	for i < len(raw) {
		end := valueEnd(raw, i)
		elems = append(elems, raw[i:end:end])
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] == ']' {
			break
		}
		i = skipSpace(raw, i+1) // the comma
	}
	return elems
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at b[i] ('"').
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return len(b)
}
