package store

import "errors"

// Errors returned (wrapped with context) by this package; test with errors.Is.
var (
	// ErrNotFound: the key holds no record.
	ErrNotFound = errors.New("not found")
	// ErrExists: a create-if-absent found the key present.
	ErrExists = errors.New("already exists")
	// ErrConflict: the record's ModRevision differs from the one given, so
	// someone else wrote it since it was read. Re-read and try again.
	ErrConflict = errors.New("revision conflict")
	// ErrPreconditionFailed: an extra compare (the If option or Txn.If), such
	// as a leader fence, did not hold. Retrying will not help.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrFenced: a write through FencedKV found the leader's election key gone or
	// re-created: the writer is no longer the leader. It comes wrapped together with
	// ErrPreconditionFailed, so code that stops on a failed fence stops on it too.
	ErrFenced = errors.New("fenced: no longer the leader")
	// ErrInvalidKey: a key or key part is malformed or outside Prefix.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidToken: a List continue token is malformed or does not belong
	// to the listed prefix.
	ErrInvalidToken = errors.New("invalid continue token")
	// ErrNoChange is returned by a Mutate function to finish without writing;
	// Mutate then returns the stored record and a nil error.
	ErrNoChange = errors.New("no change")
)
