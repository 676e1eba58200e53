"""The words people write around a secret, in the languages Deskpilot's users write in.

:mod:`redactor.secrets` finds a password, PIN or one-time code by the words in front of (or
after) it. Those words are kept here, by role and by language, so that adding a language or an
abbreviation is a one-line change and the rules stay readable:

* **cue words**: what names the secret (:data:`PASSWORD_WORDS`, :data:`PIN_WORDS`,
  :data:`ONE_TIME_CODE_WORDS`, :data:`SECURITY_ANSWER_WORDS`), with the abbreviations and
  obfuscations people type ("pw", "pswd", "p@ssword", "mdp", "P-A-S-S-W-O-R-D");
* **verbs** between the word and the value ("is", "lautet", "est", "es", "è", "to", "är"...) and
  the **fillers** that may follow them ("now", "übrigens", "maintenant", "nog steeds"...);
* **change verbs** for "changed it to X" and the prepositions of other languages ("auf X
  geändert", "changé en X", "cambié a X");
* **state words**: what follows "password is" when someone describes the password instead of
  giving it ("expired", "abgelaufen", "incorrect", "verlopen"), in every language above;
* **default passwords**: plain words that are passwords when a password word stands before them
  ("password admin", "pass guest").

Languages: English, German, French, Spanish, Italian, Portuguese, Dutch, Polish, Swedish,
Danish/Norwegian, Finnish, Czech, Hungarian, Turkish, Romanian, Russian. Each entry is a regular
expression fragment (no capturing groups), matched case-insensitively.
"""

from __future__ import annotations

# -- cue words ------------------------------------------------------------------------------------

# A letter that may be written as a look-alike: "p@ssw0rd", "pa$$word".
_A, _S, _O = "[a@4]", "[s$5]", "[o0]"
# "password" with the same separator between every letter: "p a s s w o r d", "P-A-S-S-W-O-R-D",
# "p.a.s.s.w.o.r.d" (the separator is the group "sep"; the caller adds the back-references).
SPELLED_OUT_CUE = r"p(?P<sep>[ .\-_*])a(?P=sep)s(?P=sep)s(?P=sep)w(?P=sep)o(?P=sep)r(?P=sep)d"

PASSWORD_WORDS: dict[str, str] = {
    # Longest first where one is the start of another ("pass word" before "pass").
    "en": (
        rf"pass\s?words?|pass-word|passwd|pass[\s-]?phrase|p{_A}{_S}{_S}w{_O}rd|"
        # the typing errors people make in it: "pasword", "passwrod", "passowrd", "psswd"
        r"p[a@4]?[s$5]{1,3}o?w(?:o?r|ro)?ds?|"
        # cut short: "passw: X", "pasw is X"
        r"pa[s$5]{1,2}w\.?|"
        rf"p{_A}{_S}{_S}|pswd|pwrd|pword|pwd|psw|pw|p/word|p/w|p\.w\.|"
        # the short words spelled out: "p w d", "p-w", "p.a.s.s"
        r"p[ .\-]w(?:[ .\-]d)?\.?|p[ .\-]a[ .\-]s[ .\-]s|pass|sign[\s-]?in\s+password"
    ),
    # Compounds are written as one word ("Gerätepasswort") or with a hyphen ("WLAN-Passwort"):
    # the words may follow letters (see COMPOUND_CUE_ENDINGS).
    "de": r"kennwort|passwort|zugangspasswort|kennw\.|passw\.",
    "fr": r"mot\s+de\s+passe|mdp|phrase\s+(?:secr[èe]te|de\s+passe)",
    "es": (
        r"contrase[ñn]a|frase\s+(?:secreta|de\s+contrase[ñn]a|de\s+paso)|"
        r"clave(?:\s+de\s+acceso)?"
    ),
    "ca": r"contrasenya",
    "it": r"parola\s+d'ordine|parola\s+chiave",
    "pt": r"senha|palavra-passe|palavra\s+passe",
    # "ww", as Dutch writers shorten "wachtwoord" ("mijn ww is ...")
    "nl": r"wachtwoord|wachtzin|ww",
    "pl": r"has[łl]o",
    "sv": r"l[öo]senord(?:et)?",
    "da_no": r"adgangskode|passord(?:et)?",
    "fi": r"salasana",
    "cs": r"heslo",
    "hu": r"jelsz[óo]",
    "tr": r"[şs]ifre(?:m|si)?",
    "ro": r"parol[ăa]",
    "ru": r"пароль",
}
# The password words that stand at the end of a compound ("Gerätepasswort", "adminwachtwoord").
COMPOUND_CUE_ENDINGS = r"passwort|kennwort|wachtwoord|l[öo]senord|salasana|passord"

# Keys whose value is a password: Wi-Fi and disk keys, a pre-shared key.
WIFI_AND_DISK_KEY_WORDS = (
    r"(?:wi-?fi|wlan|wpa[23]?|wep|network|bitlocker|recovery|pre-?shared|wireless)\s+"
    r"(?:key|passphrase|pass\s?phrase)|psk|"
    # a secret shared between two systems: "the shared secret for radius is X"
    r"(?:shared|radius|tacacs|ipsec|vpn)\s+secret|secret\s+(?:word|phrase)|"
    r"netzwerkschl[üu]ssel|wlan-schl[üu]ssel|sicherheitsschl[üu]ssel|"
    r"cl[ée]\s+(?:wpa2?|wi-?fi|wep|de\s+s[ée]curit[ée](?:\s+r[ée]seau)?|r[ée]seau)|"
    r"clave\s+(?:wpa2?|wi-?fi|de\s+red)|chiave\s+(?:wpa2?|wi-?fi|di\s+rete)|"
    r"netwerksleutel|wifi-sleutel|"
    # the Wi-Fi key as "netsh wlan show profile ... key=clear" prints it, in several languages
    r"key\s+content|schl[üu]sselinhalt|contenu\s+de\s+la\s+cl[ée]|contenido\s+de\s+la\s+clave|"
    r"contenuto\s+(?:della\s+)?chiave|inhoud\s+van\s+(?:de\s+)?sleutel|conte[úu]do\s+da\s+chave"
)

# Words that name a PIN or a fixed code. German and Dutch compounds end in them ("SIM-PIN",
# "Tresor-PIN", "Türcode", "pincode").
PIN_WORDS = (
    r"(?:sim\s+|voicemail\s+|windows\s+hello\s+|card\s+|door\s+|device\s+|phone\s+)?"
    r"pin(?:\s?code|-code)?|code\s+pin|c[óo]digo\s+pin|codice\s+pin|kod\s+pin|"
    r"(?:meeting\s+|zoom\s+|teams\s+|webex\s+|conference\s+|bridge\s+|dial-in\s+)?"
    r"passcode|pass\s+code|puk|p[ .\-]i[ .\-]n|"
    r"(?:door|alarm|access|entry|unlock|gate|lock|safe|keypad|building|garage|locker|phone|"
    r"screen|laptop|tablet|ipad|iphone|sim|atm|bank|voicemail|pc|computer)\s+code|"
    # the code of a screen lock: "my screen lock is 1379", "lock screen pin"
    r"screen[\s-]?lock(?:\s+(?:code|pin))?|lock[\s-]?screen\s+(?:code|pin)|"
    r"zugangscode|t[üu]rcode|schlosscode|alarmcode|entsperrcode|"
    r"code\s+(?:d'acc[èe]s|de\s+la\s+porte|porte|d'entr[ée]e|de\s+d[ée]verrouillage)|"
    r"c[óo]digo\s+de\s+(?:acceso|la\s+puerta|desbloqueo)|codice\s+(?:di\s+accesso|della\s+porta)|"
    r"toegangscode|deurcode|pincode|kod\s+dost[ęe]pu|pinkod|pinkode|"
    r"cvv2?|cvc|security\s+code"
)
# Words that name a one-time code (sent, shown or generated for one sign-in).
ONE_TIME_CODE_WORDS = (
    r"one[-\s]time\s+(?:code|password|passcode|pin)|otp|totp|tan|mtan|smstan|"
    r"(?:verification|confirmation|validation|security|login|log-in|sign-in|signin|"
    r"authentication|auth|mfa|2fa|two[-\s]factor|sms|text|email|e-mail|authenticator|"
    r"token|backup|recovery|reset|activation|pairing|approval)\s+codes?|"
    r"(?:mfa|2fa|sms|totp)\s+token|"
    # a code named by the app or service that gives it: "duo code", "the okta passcode"
    r"(?:duo|okta|google|microsoft|ms|rsa|securid|yubikey|authy|entra|azure|aws|vpn|sso)\s+"
    r"(?:verify\s+|mobile\s+|authenticator\s+)?(?:codes?|passcodes?|tokens?\s+codes?)|"
    r"best[äa]tigungscode|einmalcode|einmalpasswort|sicherheitscode|verifizierungscode|"
    r"anmeldecode|sms-code|authentifizierungscode|wiederherstellungscodes?|notfallcodes?|"
    r"code\s+(?:de\s+(?:v[ée]rification|confirmation|s[ée]curit[ée]|validation|connexion|"
    r"secours|r[ée]cup[ée]ration)|[àa]\s+usage\s+unique|sms|otp|re[çc]u)|codes\s+de\s+secours|"
    r"c[óo]digo\s+(?:de\s+(?:verificaci[óo]n|verifica[çc][ãa]o|confirmaci[óo]n|confirma[çc][ãa]o|"
    r"seguridad|seguran[çc]a|acceso|respaldo|recuperaci[óo]n)|sms|otp)|"
    r"codice\s+(?:di\s+(?:verifica|conferma|sicurezza|accesso)|sms|otp)|"
    r"verificatiecode|bevestigingscode|beveiligingscode|sms-code|eenmalige\s+code|"
    r"kod\s+(?:weryfikacyjny|sms|jednorazowy|potwierdzaj[ąa]cy)|"
    r"verifieringskod|engangskode|vahvistuskoodi|ov[ěe]řovac[íi]\s+k[óo]d|"
    r"doğrulama\s+kodu|dogrulama\s+kodu|код(?:\s+подтверждения)?|"
    # a code named by its length ("the 6-digit code", "a six digit code")
    r"(?:\d|four|five|six|seven|eight)[-\s]?digits?\s+(?:code|passcode)|"
    # a code named by what gave it ("code from the app", "Code aus der App", "code de l'appli")
    r"(?:code|kod|koodi|c[óo]digo|codice)\s+(?:from|in|aus|von|de|uit|van|da|dalla|dal|della|del|"
    r"na|no|z|ze|fr[åa]n|fra)\s+(?:the\s+|my\s+|der\s+|dem\s+|la\s+|l'|de\s+|het\s+|mijn\s+|"
    r"meiner\s+|o\s+|a\s+)?(?:app|sms|text|e-?mail|mail|authenticator|token|appli|application|"
    r"aplicaci[óo]n|aplicativo|telefoon|handy|phone|aplikacji|appen|appi|sovelluksesta|"
    r"telefonu|sovelluksen)"
)
# The apps and devices that show a one-time code ("the authenticator shows 305 718").
CODE_SOURCES = (
    r"authenticator(?:\s+app)?|(?:the\s+|my\s+)?app|(?:okta|duo|ms|microsoft|google)(?:\s+"
    r"(?:verify|mobile|authenticator))?|token|fob|yubikey|rsa(?:\s+token)?|securid|"
    r"(?:the\s+|my\s+)?phone|(?:the\s+)?sms|(?:the\s+)?text(?:\s+message)?|(?:the\s+)?e-?mail"
)
# Verbs with which an app or a message gives a code.
CODE_SOURCE_VERBS = (
    r"shows?|showed|showing|says|said|displays?|displayed|gives?|gave|generated?|reads|"
    r"sent(?:\s+me)?|texted(?:\s+me)?|has|had|zeigt|affiche|muestra|mostra|toont|geeft"
)

# Answers to security questions and other facts that unlock an account.
SECURITY_ANSWER_WORDS = (
    r"security\s+answer|secret\s+answer|(?:the\s+)?answer\s+to\s+(?:my|the)\s+"
    r"(?:security|secret)\s+question|memorable\s+(?:word|answer)|"
    r"mother'?s\s+maiden\s+name|maiden\s+name|first\s+pet'?s?(?:\s+name)?|"
    r"sicherheitsantwort|antwort\s+auf\s+die\s+sicherheitsfrage|"
    r"r[ée]ponse\s+secr[èe]te|respuesta\s+(?:de\s+seguridad|secreta)"
)

# -- verbs and fillers ----------------------------------------------------------------------------

# Verbs between the cue word and the value. Longest first.
VERBS: dict[str, str] = {
    "en": (
        r"(?:is\s+|was\s+|now\s+)?(?:set|updated|changed|reset)\s+to|"
        r"has\s+been\s+(?:set|changed|reset|updated)\s+to|"
        r"was\s+changed\s+to|changed\s+to|reset\s+to|would\s+be|should\s+be|will\s+be|"
        # a guess: "my password might be X", "it could be X"
        r"might\s+be|may\s+be|could\s+be|must\s+be|might\s+have\s+been|"
        r"is|was|are|were|reads|equals"
    ),
    "de": r"ist|lautet|lautete|war|hei[ßs]t|w[äa]re|sind",
    "fr": r"est|c'est|[ée]tait|sera|serait",
    "es": r"es|era|ser[áa]|ser[íi]a|son",
    "it": r"è|e'|era|sar[àa]|sarebbe",
    "pt": r"é|era|ser[áa]|seria|s[ãa]o",
    "nl": r"is|was|luidt|wordt|zijn",
    "pl": r"to|jest|by[łl]o|brzmi",
    "sv": r"är|var",
    "da_no": r"er|var",
    "fi": r"on|oli",
    "cs": r"je|bylo",
    "hu": r"az",
    "tr": r"ise",
}
# Verbs that are other words in English ("password on the laptop", "pass to"): only after a
# cue word of their own language.
FOREIGN_VERBS: dict[str, str] = {
    "on": "salasana", "oli": "salasana", "es": "contrase|clave|frase|c[óo]digo|pin",
    "era": "contrase|clave|senha|palavra|frase|c[óo]digo|codice|pin|password|parola",
    "war": "passwort|kennwort|pin|code", "var": "l[öo]senord|passord|adgangskode",
    "er": "passord|adgangskode", "je": "heslo", "to": "has[łl]o|kod|pin",
    "é": "senha|password|c[óo]digo|pin|palavra", "è": "password|parola|codice|pin",
    "e'": "password|parola|codice|pin",
    "est": "mot|mdp|phrase|code|pin|cl[ée]", "était": "mot|mdp|phrase|code|pin|cl[ée]",
    "c'est": "mot|mdp|phrase|code|pin|cl[ée]", "sera": "mot|mdp|code|pin",
    "az": "jelsz", "ise": "[şs]ifre", "son": "c[óo]digo|contrase",
    "are": "code", "were": "code",
}  # fmt: skip

# Words that may stand between the verb and the value ("is now X", "ist übrigens X").
FILLERS = (
    r"now|still|currently|actually|just|also|then|simply|literally|again|probably|basically|"
    r"apparently|obviously|btw|by\s+the\s+way|fyi|supposedly|definitely|temporarily|"
    r"either|maybe|perhaps|possibly|"
    r"[üu]brigens|jetzt|nun|noch|immer\s+noch|aktuell|eigentlich|gerade|momentan|wohl|halt|"
    r"also|derzeit|zurzeit|"
    r"maintenant|actuellement|toujours|encore|bien|juste|en\s+fait|d[ée]sormais|le|la|"
    r"ahora|todav[íi]a|a[úu]n|actualmente|ya|tambi[ée]n|el|"
    r"nu|nog|steeds|nog\s+steeds|eigenlijk|momenteel|trouwens|gewoon|ook|"
    r"adesso|ora|ancora|attualmente|"
    r"agora|ainda|atualmente|"
    r"teraz|nadal|"
    r"nu|fortfarande|"
    r"n[åa]|stadig"
)

# Verbs of changing a password, before the password word and "to" ("changed my pw to X").
CHANGE_VERBS = (
    r"changed|change|set|reset|updated|update|switched|switch|rotated|rotate|made|"
    r"chose|picked|went\s+with|renamed"
)
# Fillers between the changed thing and "to" ("changed my password yesterday to X").
CHANGE_FILLERS = (
    r"(?:yesterday|today|earlier|again|just|now|already|finally|last\s+(?:night|week|time)|"
    r"this\s+(?:morning|afternoon|evening|week)|on\s+\w+day|back|temporarily|myself|"
    r"to\s+something\s+new|for\s+now)"
)
# "auf X geändert", "en X" / "pour X" after "changé", "a X" / "por X" after "cambié", "naar X" /
# "in X" after "gewijzigd" / "veranderd": the other languages' "changed to X".
FOREIGN_CHANGES: tuple[str, ...] = (
    r"(?:ge[äa]ndert|gesetzt|zur[üu]ckgesetzt|umgestellt)",  # German: the verb after the value
)
FOREIGN_CHANGE_BEFORE = (
    r"chang[ée]|modifi[ée]|r[ée]initialis[ée]|mis|cambi[ée]|cambiado|puesto|"
    r"gewijzigd|veranderd|aangepast|ingesteld|cambiato|impostato|mudei|alterei|mudado|"
    r"zmieni[łl]em|zmieni[łl]am|[äa]ndrade|bytte|vaihdoin"
)
FOREIGN_CHANGE_TO = r"en|pour|par|à|a|por|naar|in|op|in|para|na|till|til|på|arvoon"

# -- words that describe a password instead of being one ---------------------------------------

STATE_WORDS: frozenset[str] = frozenset(
    {
        # English, of the system rather than the password ("the password page is down")
        "down", "offline", "unavailable", "unreachable", "slow", "gone", "greyed", "required",
        "missing", "expired", "invalid", "incorrect", "wrong", "locked", "blocked", "disabled",
        "rejected", "empty", "blank", "mandatory", "optional", "needed", "present", "absent",
        "insecure", "unsafe", "safe", "secure", "visible", "exposed", "logged", "leaked",
        "compromised", "plaintext", "out", "off", "up", "over", "known", "public", "lost",
        "stolen", "shared", "capitalised", "capitalized", "lowercase", "uppercase",
        # and what starts a pointer to it ("pw: see ticket INC0012345", "password: check the wiki")
        "see", "check", "ask", "look", "refer", "contact", "find", "attached", "below", "above",
        # German
        "abgelaufen", "falsch", "richtig", "korrekt", "ungültig", "gesperrt", "gültig",
        "leer", "vergessen", "geändert", "zurückgesetzt", "neu", "alt", "zu", "nicht", "kein",
        "keine", "noch", "immer", "das", "der", "die", "dasselbe", "gleich", "identisch",
        "zu kurz", "kurz", "lang", "sicher", "unsicher", "weg", "abgelehnt", "erforderlich",
        "bekannt", "unbekannt", "hier", "dort", "im", "in", "auf", "mein", "meins", "dein",
        "ein", "eine", "sehr", "schon", "wieder", "bitte", "leider",
        # French
        "incorrecte", "correcte", "expiré", "expirée", "invalide",
        "bloqué", "bloquée", "oublié", "oubliée", "faux", "fausse", "bon", "bonne", "vide",
        "trop", "le", "la", "les", "un", "une", "pas", "plus", "même", "différent", "nouveau",
        "ancien", "changé", "modifié", "refusé", "requis", "dans", "sur", "mon", "ma", "ton",
        "encore", "toujours", "déjà", "très",
        # Spanish / Portuguese / Italian
        "incorrecta", "incorrecto", "correcta", "correcto", "caducada", "caducado", "expirada",
        "expirado", "inválida", "inválido", "bloqueada", "bloqueado", "olvidada", "errónea",
        "mala", "vacía", "demasiado", "el", "los", "las", "una", "uno", "no", "igual", "nueva",
        "vieja", "misma", "mismo", "requerida", "en", "mi", "tu", "muy", "ya", "aún",
        "errada", "errado", "incorreta", "incorreto", "esquecida", "vazia",
        "nova", "velha", "mesma", "não", "uma", "um", "minha", "muito", "já",
        "sbagliata", "sbagliato", "errata", "scaduta", "scaduto", "bloccata", "bloccato",
        "dimenticata", "vuota", "nuova", "vecchia", "stessa", "non", "il", "lo", "gli",
        "troppo", "mia", "già",
        # Dutch
        "verlopen", "fout", "onjuist", "juist", "ongeldig", "geblokkeerd", "vergeten",
        "leeg", "nieuw", "oud", "hetzelfde", "niet", "geen", "te", "het", "de", "een", "mijn",
        "al", "weer", "nog",
        # Scandinavian, Polish, Czech, Finnish, Turkish
        "fel", "felaktigt", "utgånget", "låst", "glömt", "feil", "utløpt", "forkert", "udløbet",
        "nieprawidłowe", "błędne", "wygasło", "zablokowane", "niepoprawne", "nie",
        "špatné", "neplatné", "vypršelo", "väärä", "vanhentunut", "lukittu", "yanlış",
        "hatalı",
    }
)  # fmt: skip

# Words that follow a password word in a sentence about the password, not as its value, besides
# the state words above and the function words: when ("reset my password tomorrow", "my password
# monday morning"), how ("my password properly"), the words of chat that close a request ("my
# password asap pls", "forgot my password haha"), and the verbs that follow it uninflected when
# written in a hurry ("my password need reset", "my password expire tomorrow"). A plain word
# after "my password" is read as the password only when it is none of these (redactor.secrets,
# the bare word rule).
ASIDE_WORDS: frozenset[str] = frozenset(
    {
        "today", "tomorrow", "tonight", "yesterday", "morning", "afternoon", "evening", "night",
        "week", "weekend", "month", "year", "daily", "weekly", "monthly", "lately", "earlier",
        "later", "soon", "recently", "before", "after", "already", "yet", "ever", "anymore",
        "anyway", "anyhow", "instead", "twice", "once", "everytime", "sometimes", "always",
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
        "online", "offline", "remotely", "manually", "properly", "correctly", "successfully",
        "asap", "urgent", "urgently", "please", "pls", "plz", "thanks", "thx", "ty", "cheers",
        "sorry", "haha", "hahaha", "lol", "ugh", "argh", "oops", "hi", "hello", "hey", "help",
        "btw", "fyi", "idk", "again", "plus", "minus", "including", "like", "unlike", "versus",
        "order",
        "need", "work", "fail", "stop", "expire", "want", "require", "show", "say", "look",
        "appear", "remain", "stay", "let", "allow", "accept", "reject", "lock", "unlock", "seem",
        "come", "suck", "die", "break", "shall", "ought",
        # their negations typed without the apostrophe, and participles that are no "-ed" form
        "doesnt", "dont", "didnt", "isnt", "wasnt", "arent", "werent", "wont", "cant",
        "couldnt", "wouldnt", "shouldnt", "hasnt", "havent", "hadnt", "aint",
        "given", "sent", "shown", "written", "chosen", "taken", "told", "gotten", "kept",
        "found", "said", "meant", "left",
    }
)  # fmt: skip

# Plain words that are passwords when a password word stands right before them: the factory
# defaults and the classics people still use. Words of ordinary IT text ("user", "access",
# "hello", "default") are left out: in text stripped of its stop words ("change password hello
# please assist") they follow "password" without being one.
DEFAULT_PASSWORDS: frozenset[str] = frozenset(
    {
        "admin", "administrator", "root", "toor", "guest", "changeme", "letmein", "welcome",
        "qwerty", "abc123", "123456", "1234", "12345", "12345678", "0000", "1111", "passw0rd",
        "p@ssw0rd", "trustno1", "iloveyou", "hunter2", "ubnt", "cisco", "raspberry", "alpine",
        "vagrant", "postgres", "mysql", "oracle", "operator", "secret", "sa",
    }
)  # fmt: skip

# Account names devices and databases ship with: with a default password beside them ("admin /
# admin", "cisco:cisco", "pi:raspberry") they are a working login.
DEFAULT_USERS: frozenset[str] = frozenset(
    {
        "admin", "administrator", "root", "user", "guest", "pi", "ubnt", "cisco", "sa",
        "operator", "support", "manager", "service", "test", "demo", "postgres", "oracle",
        "super", "supervisor", "sysadmin", "tech", "monitor", "vagrant",
    }
)  # fmt: skip

# -- words of a message about a credential, wherever they stand --------------------------------

# Words that make a message one about signing in or about a secret, anywhere within a short
# window of a token: a token shaped like a password there is one, even with no word naming it
# right before it ("locked again. first Harbour#07 then Harbour#08", "I typed it... Fern_Gate_4").
# The password words of every language above count too (the caller adds them). By role:
CONTEXT_WORDS: dict[str, str] = {
    # signing in, and what the sign-in page answers
    "sign_in": (
        r"log(?:ged|ging)?[\s-]?(?:in|on)|login|logon|sign(?:ed|ing)?[\s-]?in|sso|creds?|"
        r"credentials?|locked(?:[\s-]?out)?|lock[\s-]?out|unlock|wrong|incorrect|invalid|"
        r"rejected|denied|not\s+accepted|"
        r"anmeld\w*|einlogg\w*|gesperrt|falsch|connexion|connecter|bloqu[ée]e?|"
        r"iniciar\s+sesi[óo]n|bloquead[oa]|inloggen|geblokkeerd|accedi|bloccat[oa]|"
        r"zalogowa\w*|zablokowan\w*|logga\s+in|kirjau\w*"
    ),
    # typing or trying a value
    "typed": (
        r"tried|try(?:ing)?|typed?|typing|entered|re-?entered|put\s+in|keyed\s+in|"
        r"eingegeben|eingetippt|versucht|saisi|tap[ée]|essay[ée]|introduje|ingres[ée]|prob[ée]|"
        r"digitei|tentei|ingevoerd|getypt|geprobeerd|inserito|provato|wpisa[łl]\w*|"
        r"pr[öo]vade|skrev"
    ),
    # setting a new value: "I reset it to X", "changed it to X", "auf X geändert"
    "changed": (
        r"reset|re-?set\s+it|changed?|changing|updated|"
        r"zur[üu]ckgesetzt|ge[äa]ndert|r[ée]initialis[ée]e?|chang[ée]e?|modifi[ée]e?|"
        r"restablec\w*|cambi[ée]|gewijzigd|veranderd|reimpostat\w*|cambiat\w*|alterei|"
        r"redefini|zmieni\w*|[äa]ndrade|bytte"
    ),
    # what is said of a password's strength, age and letters
    "described": (
        r"too\s+weak|weak|strong\s+enough|complexity|breach(?:ed)?|pwned|expired|temporary\s+one|"
        r"temp\s+one|same\s+one|lower[\s-]?case|upper[\s-]?case|capital(?:\s+letters?)?|"
        r"case[\s-]sensitive|caps[\s-]?lock|zu\s+schwach|trop\s+faible|demasiado\s+d[ée]bil|"
        r"te\s+zwak|provisoire|provisional|tempor[äa]r|tijdelijk"
    ),
}

# What security questions ask about, in several languages: with a word of such a question near
# ("answer", "security question", "reset"), what follows them is the answer ("my first car
# was a blue Vauxhall Astra", "the street I grew up on: Rue des Lilas").
SECURITY_TOPIC_WORDS = (
    r"(?:my\s+|the\s+|your\s+)?(?:first|1st)\s+(?:car|pet|school|job|teacher|concert|boss|"
    r"employer|phone|album|kiss|love)(?:'?s\s+name)?|childhood\s+(?:friend|hero|nickname|"
    r"street|home)|(?:best|oldest)\s+friend'?s?(?:\s+name)?|favou?rite\s+(?:teacher|food|book|"
    r"film|movie|colou?r|band|team|sports\s+team|singer|place|city|animal|dish)|"
    r"(?:city|town|place|hospital)\s+(?:where\s+)?(?:i|you)\s+was\s+born|"
    r"(?:city|town|place)\s+of\s+birth|birthplace|"
    r"street\s+(?:i|you)\s+grew\s+up\s+(?:on|in)|(?:father|mother|dad|mum|mom)'?s?\s+"
    r"(?:middle|maiden|first)\s+name|mothers?\s+maiden\s+name|honeymoon\s+(?:destination|"
    r"city|place)|"
    r"erste[nrs]?\s+(?:auto|haustier|schule|lehrer(?:in)?)|lieblings\w+|geburtsort|"
    r"m[äa]dchenname(?:\s+(?:der|meiner)\s+mutter)?|"
    r"premi(?:er|[èe]re)\s+(?:voiture|animal|[ée]cole|ma[îi]tresse)|nom\s+de\s+jeune\s+fille|"
    r"ville\s+de\s+naissance|primer\s+(?:coche|carro|auto|colegio)|primera\s+mascota|"
    r"ciudad\s+(?:natal|de\s+nacimiento)|eerste\s+(?:auto|huisdier|school)|geboorteplaats|"
    r"meisjesnaam"
)
# Words of a security question near such a topic.
SECURITY_QUESTION_WORDS = (
    r"security\s+(?:question|answer)s?|secret\s+(?:question|answer)|memorable|answers?|"
    r"questions?|reset|recovery|verify|verification|self[\s-]?service|"
    r"sicherheitsfrage|antwort|r[ée]ponse|question\s+secr[èe]te|pregunta|respuesta|"
    r"beveiligingsvraag|antwoord|domanda|risposta"
)
