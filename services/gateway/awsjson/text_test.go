package awsjson

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"unicode/utf8"
)

// plainByte is plain8's rule for one byte.
func plainByte(c byte) bool { return c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' }

// plain8 says a word is plain exactly when each of its bytes is: every byte value at
// every position among plain neighbours, and random words.
func TestPlain8(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			w := uint64(0x6161616161616161)&^(0xff<<(8*pos)) | uint64(c)<<(8*pos)
			if got := plain8(w); got != plainByte(byte(c)) {
				t.Fatalf("plain8(%#x) = %v with byte %#x at %d", w, got, c, pos)
			}
		}
	}
	rng := rand.New(rand.NewPCG(8, 8))
	alphabet := []byte{0, 0x1f, 0x20, 0x21, '"', 0x23, '\\', 0x5b, 0x5d, 0x7f, 0x80, 0xff, 'a'}
	for range 200000 {
		var w uint64
		want := true
		for i := range 8 {
			c := alphabet[rng.IntN(len(alphabet))]
			want = want && plainByte(c)
			w |= uint64(c) << (8 * i)
		}
		if got := plain8(w); got != want {
			t.Fatalf("plain8(%#x) = %v, want %v", w, got, want)
		}
	}
}

// appendText writes what a byte-at-a-time escaper writes, for strings and bytes alike.
func TestAppendTextMatchesBytewise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 9))
	pieces := []string{"a", "abcdefgh", "\"", "\\", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "é", "名", "\u2028", "\u2029", "\xff", "\xe2\x80", " "}
	for range 20000 {
		s := ""
		for range rng.IntN(12) {
			s += pieces[rng.IntN(len(pieces))]
		}
		want, wantInvalid := bytewise(s)
		got, invalid := appendText([]byte("x"), s)
		gotB, invalidB := appendText([]byte("x"), []byte(s))
		if string(got[1:]) != want || string(gotB[1:]) != want || invalid != wantInvalid || invalidB != wantInvalid {
			t.Fatalf("appendText(%q) = %s / %s (invalid %v/%v), want %s (invalid %v)", s, got[1:], gotB[1:], invalid, invalidB, want, wantInvalid)
		}
	}
}

// bytewise is the escaper appendText's fast path must agree with.
func bytewise(s string) (string, bool) {
	out := []byte{'"'}
	invalid := false
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				out = append(out, '\\', c)
			case c == '\n':
				out = append(out, `\n`...)
			case c == '\r':
				out = append(out, `\r`...)
			case c == '\t':
				out = append(out, `\t`...)
			case c < 0x20:
				out = append(out, `\u00`...)
				out = append(out, hex[c>>4], hex[c&0xf])
			default:
				out = append(out, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
			invalid = true
		case r == '\u2028' || r == '\u2029':
			out = append(out, `\u`...)
			out = strconv.AppendInt(out, int64(r), 16)
		default:
			out = append(out, s[i:i+size]...)
		}
		i += size
	}
	return string(append(out, '"')), invalid
}
