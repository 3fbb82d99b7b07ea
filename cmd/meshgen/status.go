package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(issue): replaced by the real command.
func newStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "not built yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("status is not built yet")
		},
	}
}
