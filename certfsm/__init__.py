"""certfsm: certified lookup-table state machines from neural controllers."""
