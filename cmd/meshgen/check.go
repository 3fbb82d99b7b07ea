package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(issue): replaced by the real command.
func newCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "not built yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("check is not built yet")
		},
	}
}
