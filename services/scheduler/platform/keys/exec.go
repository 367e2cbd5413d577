package keys

import "github.com/berthhq/berth/services/scheduler/platform/store"

// ECS Exec sessions (package control opens them, package agentsession joins them):
//
//	exec/{account}/{region}/{sessionId}  storev1.ExecSessionRecord, on a lease of the
//	    session token's lifetime; deleted when the client joins (a token opens one session)

// ExecSession returns the key of an ExecuteCommand session.
func ExecSession(account Scope, sessionID string) string {
	return store.MustKey("exec", account.Account, account.Region, sessionID)
}

// ExecSessions returns the prefix of an account's ExecuteCommand sessions.
func ExecSessions(account Scope) string {
	return store.MustKeyPrefix("exec", account.Account, account.Region)
}
