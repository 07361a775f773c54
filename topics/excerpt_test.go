package topics

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// An error quotes at most an excerpt of the token it is about, however long
// the token; a type error names its field.
func TestErrorsQuoteExcerptsAndNameTheField(t *testing.T) {
	long := strings.Repeat("9", 900_000)
	for _, tc := range []struct {
		name, event, frag string
	}{
		{"long number", `{"id":"a","x":[` + long + `e99999]}`, `field "x": malformed JSON: number "999`},
		{"unknown field", `{"id":"a","` + strings.Repeat("f", 900_000) + `":1}`, `unknown field "fff`},
		{"long ts", `{"id":"a","ts":"` + long + `","x":[1]}`, `"ts" "999`},
		{"long feature twice", `{"id":"a","features":{"` + long[:400_000] + `":1,"` + long[:400_000] + `":2}}`, `feature "999`},
		{"string label", `{"id":"a","x":[1],"label":"yes"}`, `field "label": malformed JSON: expected a number at byte 26`},
		{"string x", `{"id":"a","x":"1"}`, `field "x": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.event), 0)
			if err == nil || !strings.Contains(err.Error(), tc.frag) || len(err.Error()) > MaxExcerptBytes+200 {
				t.Fatalf("error of %d bytes: %.400v; want at most %d bytes containing %q", len(fmtLen(err)), err, MaxExcerptBytes+200, tc.frag)
			}
		})
	}
}

func fmtLen(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestExcerpt(t *testing.T) {
	if got := Excerpt("short"); got != `"short"` {
		t.Fatalf("Excerpt(short) = %s", got)
	}
	s := strings.Repeat("é", 300) // 600 bytes, the cut falls inside a rune
	got := Excerpt(s)
	if !strings.HasSuffix(got, "… (600 bytes)") || len(got) > MaxExcerptBytes+32 || !utf8.ValidString(got) {
		t.Fatalf("Excerpt of 600 bytes = %s", got)
	}
}
