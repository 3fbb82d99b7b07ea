package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(issue): replaced by the real command.
func newGenesisCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "genesis",
		Short: "not built yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("genesis is not built yet")
		},
	}
}
