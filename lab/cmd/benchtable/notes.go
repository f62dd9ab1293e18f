package main

import (
	"errors"
	"fmt"
	"strings"
)

// errNotes wraps every problem found in the notes file.
var errNotes = errors.New("bad notes")

// methods is the notes section printed before the tables.
const methods = "Methods"

// Notes is the prose of BENCHMARKS.md: sections of Markdown by heading.
type Notes struct {
	order    []string
	sections map[string]string
}

// ParseNotes splits the notes file at its "## " headings. Text before the
// first heading is the file's own comment and is dropped; a "Methods"
// section is required; "#" and "###" lines are refused at that level so a
// section's headings stay below the tables' ("####" and deeper are kept).
func ParseNotes(text string) (*Notes, error) {
	n := &Notes{sections: map[string]string{}}
	var cur string
	var body []string
	flush := func() {
		if cur != "" {
			n.sections[cur] = strings.TrimSpace(strings.Join(body, "\n"))
		}
	}
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if !inFence {
			if h, ok := strings.CutPrefix(line, "## "); ok {
				flush()
				cur, body = strings.TrimSpace(h), nil
				if _, dup := n.sections[cur]; dup || cur == "" {
					return nil, fmt.Errorf("%w: line %d: heading %q empty or repeated", errNotes, i+1, cur)
				}
				n.order = append(n.order, cur)
				continue
			}
			if strings.HasPrefix(line, "# ") || strings.HasPrefix(line, "### ") {
				return nil, fmt.Errorf("%w: line %d: only \"## \" headings (and \"#### \" within a section)", errNotes, i+1)
			}
		}
		if cur != "" {
			body = append(body, line)
		}
	}
	flush()
	if _, ok := n.sections[methods]; !ok {
		return nil, fmt.Errorf("%w: no %q section", errNotes, methods)
	}
	return n, nil
}

// Section returns the body of one heading, "" when absent.
func (n *Notes) Section(h string) string { return n.sections[h] }

// checkAreas refuses a section that names no area of the rows.
func (n *Notes) checkAreas(areas []string) error {
	for _, h := range n.order {
		if h != methods && !contains(areas, h) {
			return fmt.Errorf("%w: section %q names no area of the rows (areas: %s)", errNotes, h, strings.Join(areas, ", "))
		}
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
