package events

// OnResync sets a function r's task watch calls after each listing of the tasks, so a
// test writes its changes after the watch has its starting point.
func OnResync(r *Runner, fn func()) { r.resynced = fn }
