package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(issue): replaced by the real command.
func newGraphCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "graph",
		Short: "not built yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("graph is not built yet")
		},
	}
}
