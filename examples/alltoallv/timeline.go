package main

import (
	"encoding/json"
	"os"

	"github.com/hetcomm/hetcomm/collective"
)

func writeTimeline(path string, predicted, measured *collective.Plan) error {
	b, err := json.MarshalIndent(map[string]*collective.Plan{"predicted": predicted, "measured": measured}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
