package bootstrap

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ExpandHostlist expands a Slurm hostlist expression such as
// "node[01-03,7],login" into its host names, in order.
func ExpandHostlist(s string) ([]string, error) {
	var out []string
	for len(s) > 0 {
		// Take one item up to a comma outside brackets.
		depth, end := 0, len(s)
		for i, c := range s {
			if c == '[' {
				depth++
			} else if c == ']' {
				depth--
			} else if c == ',' && depth == 0 {
				end = i
				break
			}
		}
		item := s[:end]
		if end < len(s) {
			s = s[end+1:]
		} else {
			s = ""
		}
		if item == "" {
			continue
		}
		hosts, err := expandItem(item)
		if err != nil {
			return nil, err
		}
		out = append(out, hosts...)
	}
	return out, nil
}

func expandItem(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "]") {
			return nil, errors.New("bootstrap: bad hostlist item " + item)
		}
		return []string{item}, nil
	}
	closeIdx := strings.IndexByte(item[open:], ']')
	if closeIdx < 0 {
		return nil, errors.New("bootstrap: unbalanced bracket in hostlist item " + item)
	}
	closeIdx += open
	prefix, ranges, rest := item[:open], item[open+1:closeIdx], item[closeIdx+1:]
	tails, err := expandItem(rest)
	if rest == "" {
		tails, err = []string{""}, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		z, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || z < a || z-a > 100000 {
			return nil, errors.New("bootstrap: bad hostlist range " + r)
		}
		width := len(lo)
		for n := a; n <= z; n++ {
			num := fmt.Sprintf("%0*d", width, n)
			for _, t := range tails {
				out = append(out, prefix+num+t)
			}
		}
	}
	return out, nil
}
