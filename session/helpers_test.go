package session_test

import "time"

// wait is the generous bound for transitions in these tests; assertions are
// about order, except where a test says otherwise.
const wait = 30 * time.Second
