package timelinecheck

import "testing"

func TestValidateRejects(t *testing.T) {
	meta := `{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"t"}}`
	for name, doc := range map[string]string{
		"not json":        `{"traceEvents": [`,
		"no events":       `{"displayTimeUnit":"ms"}`,
		"X without dur":   `[{"name":"a","ph":"X","ts":1,"pid":1,"tid":1}]`,
		"X without tid":   `[{"name":"a","ph":"X","ts":1,"dur":1,"pid":1}]`,
		"X without name":  `[{"ph":"X","ts":1,"dur":1,"pid":1,"tid":1}]`,
		"negative dur":    `[{"name":"a","ph":"X","ts":1,"dur":-1,"pid":1,"tid":1}]`,
		"partial overlap": `[{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},{"name":"b","ph":"X","ts":5,"dur":10,"pid":1,"tid":1}]`,
		"back in time":    `[{"name":"a","ph":"X","ts":5,"dur":1,"pid":1,"tid":1},{"name":"b","ph":"X","ts":1,"dur":1,"pid":1,"tid":1}]`,
		"counter no args": `[{"name":"c","ph":"C","ts":1,"pid":1}]`,
		"counter string":  `[{"name":"c","ph":"C","ts":1,"pid":1,"args":{"v":"x"}}]`,
		"counter back":    `[{"name":"c","ph":"C","ts":2,"pid":1,"args":{"v":1}},{"name":"c","ph":"C","ts":1,"pid":1,"args":{"v":1}}]`,
		"unknown phase":   `[{"name":"a","ph":"Q","ts":1,"pid":1,"tid":1}]`,
		"unknown meta":    `[{"name":"colour","ph":"M","pid":1,"args":{}}]`,
		"thread no name":  `[{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{}}]`,
		"E without B":     `[` + meta + `,{"ph":"E","ts":1,"pid":1,"tid":1}]`,
	} {
		if err := Validate([]byte(doc)); err == nil {
			t.Errorf("%s: accepted %s", name, doc)
		}
	}
	ok := `[` + meta + `,{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},{"name":"b","ph":"X","ts":2,"dur":8,"pid":1,"tid":1},` +
		`{"name":"c","ph":"X","ts":10,"dur":1,"pid":1,"tid":1},{"name":"d","ph":"B","ts":12,"pid":1,"tid":1},{"ph":"E","ts":13,"pid":1,"tid":1}]`
	if err := Validate([]byte(ok)); err != nil {
		t.Errorf("nested slices rejected: %v", err)
	}
}
