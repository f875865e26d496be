package yamlfile

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// pathAtLine returns the field path (nodePools[1].gpus.count) of the key or
// list item that starts at line, or "" when none does.
func pathAtLine(n *yaml.Node, line int) string {
	p, _ := findLine(n, "", line)
	return p
}

func findLine(n *yaml.Node, path string, line int) (string, bool) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if p, ok := findLine(c, path, line); ok {
				return p, true
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := childPath(path, k.Value)
			if k.Line == line {
				return p, true
			}
			if p, ok := findLine(v, p, line); ok {
				return p, true
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if q, ok := findLine(c, p, line); ok {
				return q, true
			}
			if c.Line == line {
				return p, true
			}
		}
	case yaml.ScalarNode:
		if n.Line == line {
			return path, true
		}
	}
	return "", false
}

// childPath names a mapping key the way field.Path does: struct fields as
// .name, map keys that look like label keys as [key].
func childPath(path, key string) string {
	if strings.ContainsAny(key, "./") {
		return path + "[" + key + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// lineOfPath returns the line of the node at path, or of its deepest
// existing ancestor when the field is missing; 0 when nothing matches.
func lineOfPath(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, seg := range splitPath(path) {
		next := child(n, seg)
		if next == nil {
			break
		}
		n, line = next, next.Line
	}
	return line
}

func child(n *yaml.Node, seg string) *yaml.Node {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == seg {
				// Point at the value, except for an empty value: then at the key.
				if v := n.Content[i+1]; v.Line > 0 {
					return v
				}
				return n.Content[i]
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}

// splitPath splits "a[1].b[x.y/z].c" into a, 1, b, x.y/z, c.
func splitPath(s string) []string {
	var segs []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			segs = append(segs, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.':
			flush()
		case '[':
			flush()
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				cur.WriteString(s[i+1:])
				i = len(s)
				continue
			}
			segs = append(segs, s[i+1:i+end])
			i += end
		default:
			cur.WriteByte(s[i])
		}
	}
	flush()
	return segs
}
