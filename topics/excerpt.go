package topics

import (
	"strconv"
	"unicode/utf8"
)

// MaxExcerptBytes bounds how much of an offending token an error quotes: a
// dead letter's error header and a log line stay small however large the
// token (a megabyte-long number or field name).
const MaxExcerptBytes = 256

// Excerpt quotes s as %q does when it holds at most MaxExcerptBytes bytes;
// a longer s is cut at a UTF-8 boundary at or below that and followed by
// "… (N bytes)", N being its full length.
func Excerpt(s string) string {
	if len(s) <= MaxExcerptBytes {
		return strconv.Quote(s)
	}
	cut := MaxExcerptBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
