package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/perfgate/perfgate/internal/github/server"
	"github.com/perfgate/perfgate/internal/store"
)

// storeFlags are the flags of the commands that read the server's store
// (runners, usage, baseline). Without --db they find the store where
// perfgate serve keeps it (server.LocateStore), and none of them creates
// one: a command run from the wrong directory says where it looked rather
// than answering from an empty database.
type storeFlags struct {
	db, config *string
}

func addStoreFlags(fs *flagSet) *storeFlags {
	return &storeFlags{
		db: fs.String("db", "", "the server's database: a SQLite file or a postgres:// URL (default: where perfgate serve keeps it: "+
			"PERFGATE_DATABASE_URL, else PERFGATE_DATA_DIR/perfgate.db, or the server config's database_url/data_dir)"),
		config: fs.String("server-config", envOr("PERFGATE_CONFIG", ""), "the server's config file, for its database_url and data_dir (env PERFGATE_CONFIG)"),
	}
}

// open opens the server's existing store.
func (f *storeFlags) open(ctx context.Context) (store.Store, error) {
	loc := server.StoreLocation{DSN: *f.db, From: "--db"}
	if loc.DSN == "" {
		var err error
		if loc, err = server.LocateStore(*f.config); err != nil {
			return nil, fmt.Errorf("find the server's database: %w", err)
		}
	}
	st, err := store.Open(ctx, loc.DSN, store.Existing())
	if errors.Is(err, store.ErrNoDatabase) {
		return nil, fmt.Errorf("%w (looked there after %s); point at the server's store with "+
			"PERFGATE_DATA_DIR or PERFGATE_DATABASE_URL as perfgate serve has them, --server-config, or --db", err, loc.From)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}
