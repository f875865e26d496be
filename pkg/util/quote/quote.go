// Package quote writes values users gave (annotations, labels, fields)
// into messages that land on objects: pod conditions, events, statuses.
// A value is quoted and cut at MaxLen bytes, so that a pasted blob cannot
// flood a condition; the message still names the key and the reason.
package quote

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxLen is the most of a value a message repeats.
const MaxLen = 64

// Value returns v quoted, cut at MaxLen bytes with its length noted.
func Value(v string) string {
	if len(v) <= MaxLen {
		return strconv.Quote(v)
	}
	cut := v[:MaxLen]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(cut), len(v))
}
