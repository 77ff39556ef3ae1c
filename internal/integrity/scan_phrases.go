package integrity

import (
	"fmt"
	"strings"
	"sync"
)

// Word lists shared by several phrases.
const (
	aiNames   = "ai|assistant|assistants|llm|llms|claude|chatgpt|gpt|gemini|copilot|language+model|ai+model|ai+assistant"
	prior     = "previous|prior|above|earlier|preceding|former|original|initial|system|safety"
	orders    = "instructions|instruction|directions|rules|prompts|prompt|guidelines|directives|messages|context"
	negation  = "do+not|don't|dont|never|must+not|mustn't|should+not|shouldn't|shall+not"
	tellVerbs = "tell|mention|inform|notify|alert|reveal|disclose|show|report|say|explain|let|admit"
	theUser   = "user|users|human|humans"
	useVerbs  = "use|uses|using|call|calls|calling|invoke|invokes|invoking|run|runs|running|execute|executes|executing|used|called|invoked"
	sendVerbs = "read|send|pass|include|copy|upload|post|exfiltrate|extract|share|forward|attach|append|leak|collect|dump|print|paste|email|transmit|steal|harvest|grab"
	overrides = "always|must|first|never|make+sure|ensure|add|include|send|change|set|append|prepend|attach|cc|bcc|redirect|instead|replace|also|should|shall"
	secrets   = "api+key|api+keys|apikey|private+key|private+keys|ssh+key|ssh+keys|access+key|access+keys|secret+key|secret+keys|signing+key|" +
		"token|tokens|access+token|password|passwords|passphrase|credential|credentials|secret|secrets|session+cookie|cookies|seed+phrase|mnemonic"
)

// phraseTable returns every phrase rule; the severity of a phrase may be
// below its rule's where the wording also has honest uses (documented in
// docs/integrity.md). A function, parsed on the first scan: every mcpbox
// process, the sandbox init included, would parse it at start-up.
func phraseTable() []phrase {
	return []phrase{
		// model-directive
		parsePhrase(RuleModelDirective, SeverityHigh, "ignore|disregard|forget|skip [all|any|the|your] [of+the|of+your] "+prior+" "+orders),
		parsePhrase(RuleModelDirective, SeverityHigh, "ignore|disregard|forget your|all+previous|all+prior "+orders),
		parsePhrase(RuleModelDirective, SeverityHigh, "supersede|supersedes|override|overrides|overriding|take+precedence+over|takes+precedence+over|replace|replaces "+
			"[all|any|the|your] ["+prior+"|other|user|user's] instructions|guidelines|system+prompt|directives"),
		// "You must first log in" is a common error text: definitions only.
		defOnly(parsePhrase(RuleModelDirective, SeverityLow, "you must|should|need+to|have+to first|immediately")),
		defOnly(parsePhrase(RuleModelDirective, SeverityLow, "you first need+to|must|have+to|should")),
		parsePhrase(RuleModelDirective, SeverityMedium, "before|prior+to using|calling|invoking|running|executing|you+use|you+call|you+run "+
			"this|the|these|any tool|tools|function|functions|server *2 read|call|send|invoke|run|execute|fetch|open|cat|upload|pass|include|attach|copy|load|post|email|forward"),
		parsePhrase(RuleModelDirective, SeverityMedium, "as an|a ai|llm|assistant|language+model|ai+assistant|ai+model|ai+language+model"),
		// "Note to the AI: ..." addresses the model; "the client passed
		// server instructions to the LLM" only speaks of it.
		notAfter(parsePhrase(RuleModelDirective, SeverityHigh, "attention|note|message|instructions|instruction|reminder|notice|important to|for [the|all|any|every] "+aiNames),
			"server|server's|its|their|pass|passes|passed|passing|send|sends|sent|sending|give|gives|gave|provide|provides|provided|forward|forwards|forwarded"),
		parsePhrase(RuleModelDirective, SeverityHigh, "dear|hey|hello "+aiNames+"|model|agent"),
		parsePhrase(RuleModelDirective, SeverityHigh, "the|this|dear|any "+aiNames+" must|should|shall|always|never|is+required+to|needs+to|has+to|will+need+to|may+not|is+instructed+to"),
		parsePhrase(RuleModelDirective, SeverityMedium, "new|updated|revised|real|actual|true|hidden|secret system+prompt|system+instructions|system+message"),
		parsePhrase(RuleModelDirective, SeverityHigh, "your real|actual|true|hidden|secret instructions|task|goal|objective|purpose|mission"),
		parsePhrase(RuleModelDirective, SeverityMedium, "reveal|print|repeat|output|show|dump|leak|disclose|tell+me [me] [your|the] system+prompt|initial+instructions|hidden+instructions|developer+message"),
		parsePhrase(RuleModelDirective, SeverityHigh, negation+" follow|obey|listen+to [the|any|your] user|user's|previous|prior|original|system"),
		parsePhrase(RuleModelDirective, SeverityMedium, "from+now+on you|always|never|ignore|respond|reply|answer|act"),

		// secrecy
		parsePhrase(RuleSecrecy, SeverityHigh, negation+" "+tellVerbs+" *4 "+theUser),
		parsePhrase(RuleSecrecy, SeverityHigh, negation+" mention|tell|reveal|disclose|admit|acknowledge this|that|it|anything|these"),
		parsePhrase(RuleSecrecy, SeverityHigh, "without telling|informing|notifying|alerting|letting|showing|asking+permission+from [the|your|any] "+theUser),
		parsePhrase(RuleSecrecy, SeverityHigh, "without the+user's|the+user|your+user's knowledge|knowing|noticing|consent|awareness"),
		parsePhrase(RuleSecrecy, SeverityHigh, "user|users|human must|should|shall|needs+to|need+to|may not|never know|see|notice|find+out|learn|be+told|be+informed|be+aware|suspect|discover"),
		parsePhrase(RuleSecrecy, SeverityHigh, "keep|keeping this|these|it|that|the+following [instructions|instruction|information|step|steps|note|part|request] [a] secret|hidden|confidential|between+us|to+yourself"),
		parsePhrase(RuleSecrecy, SeverityHigh, "hide|hiding|conceal|concealing this|it|these|that|them [step|steps|instruction|instructions|action|actions|information|request|call] from [the|your] "+theUser),
		parsePhrase(RuleSecrecy, SeverityHigh, "secretly|covertly|surreptitiously|stealthily|behind+the+user's+back"),

		// credential-access, phrase form (the paths are in credentialMarkers)
		parsePhrase(RuleCredentialAccess, SeverityMedium, sendVerbs+" *3 your|all|any|their|the+user's|user's|users' *2 "+secrets),

		// tool-shadowing
		parsePhrase(RuleToolShadowing, SeverityHigh, "when|whenever|if|once|while|each+time|every+time|any+time|anytime [you|the+assistant|the+agent|the+model|the+ai|claude] "+
			useVerbs+" [the] $T *6 "+overrides),
		parsePhrase(RuleToolShadowing, SeverityHigh, "when|whenever|if|once|while *2 $T [tool|function] is|are|gets|get used|called|invoked|run|executed|available|present|enabled|loaded|active *6 "+overrides),
		parsePhrase(RuleToolShadowing, SeverityHigh, "$T [tool|function] must|should|shall|always|never|has+to|have+to|needs+to|need+to|is+required+to|is+to|will+need+to"),
		parsePhrase(RuleToolShadowing, SeverityHigh, "instead+of|in+place+of|rather+than [using|calling|invoking|running] [the] $T"),
		parsePhrase(RuleToolShadowing, SeverityHigh, "before|after|whenever [you] using|calling|invoking|running|executing|use|call|invoke|run [the] $T *6 "+overrides),
		parsePhrase(RuleToolShadowing, SeverityHigh, "side+effect|side+effects|effect|effects|impact on|upon *3 $T"),
		parsePhrase(RuleToolShadowing, SeverityHigh, "override|overrides|overriding|redirect|redirects|intercept|intercepts|hijack|hijacks|modify|modifies|alter|alters|patch|patches "+
			"[the] [behaviour|behavior|functionality|output|results|arguments|parameters|recipient|recipients] [of] [the] $T"),
	}
}

var phraseIndex = sync.OnceValue(func() *phraseSet { return newPhraseSet(phraseTable()) })

// phrases runs the phrase rules on one normalized text.
func (s *scanner) phrases(f scanField, n normText) {
	ws, text := words(n.s)
	if len(ws) == 0 {
		return
	}
	m := &matcher{n: n, ws: ws, text: text, tools: s.tools}
	m.run(phraseIndex(), func(h phraseHit) {
		if s.result && (!resultRules[h.p.rule] || h.p.defOnly) {
			return
		}
		if s.known(h.p.rule, h.p.sev, f.where) {
			return
		}
		a, b := m.bytes(h.start, h.end)
		start, end := n.span(f.text, a, b)
		s.addSev(h.p.rule, h.p.sev, f.where, f.text, start, end, phraseMessage(h.p.rule, n.s[a:b]))
	})
}

// resultRules are the rules ScanResult applies.
var resultRules = map[string]bool{RuleHiddenTag: true, RuleModelDirective: true, RuleSecrecy: true, RuleInvisibleUnicode: true}

func phraseMessage(rule, hit string) string {
	switch rule {
	case RuleModelDirective:
		return fmt.Sprintf("instruction addressed to the model: %s", quoted(hit))
	case RuleSecrecy:
		return fmt.Sprintf("asks to keep something from the user: %s", quoted(hit))
	case RuleCredentialAccess:
		return fmt.Sprintf("asks to read or send secrets: %s", quoted(hit))
	case RuleToolShadowing:
		return fmt.Sprintf("changes how another tool is used: %s", quoted(hit))
	}
	return quoted(hit)
}

// defOnly marks a phrase ScanResult skips.
// notAfter makes p not match right after one of words ("a|b|c").
func notAfter(p phrase, words string) phrase {
	p.notAfter = strings.Split(words, "|")
	return p
}

func defOnly(p phrase) phrase {
	p.defOnly = true
	return p
}
