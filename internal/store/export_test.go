package store

// ClaimPickSQL is the PostgreSQL statement a claim picks its job with
// (parameters: agent id, labels, GPUs), for the plan test.
func ClaimPickSQL() string { return postgresDialect.rebind(postgresDialect.claimPick()) }

// ClaimPickSQLite is the SQLite statement a claim picks its job with.
func ClaimPickSQLite() string { return sqliteDialect.claimPick() }
