package quote

import (
	"strings"
	"testing"
)

func TestValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"500", `"500"`},
		{strings.Repeat("a", MaxLen), `"` + strings.Repeat("a", MaxLen) + `"`},
		{strings.Repeat("a", 10205), `"` + strings.Repeat("a", MaxLen) + `"... (10205 bytes)`},
		// A cut never splits a character: 63 bytes of "a", then "é" (2 bytes).
		{strings.Repeat("a", MaxLen-1) + "éé", `"` + strings.Repeat("a", MaxLen-1) + `"... (67 bytes)`},
	} {
		if got := Value(tc.in); got != tc.want {
			t.Errorf("Value(%d bytes) = %s, want %s", len(tc.in), got, tc.want)
		}
	}
}
