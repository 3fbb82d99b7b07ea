package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(issue): replaced by the real command.
func newPlanCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "plan",
		Short: "not built yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("plan is not built yet")
		},
	}
}
