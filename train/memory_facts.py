"""Facts and questions for the memory task: varied values, statements and paraphrased questions.

A fact is (entity, attribute, value). It is *stated* once with one template (the sentence that
ends up in an episode of the store) and *asked* later with another template, usually with other
words for the attribute and another word order, inside one of several question scaffolds.

Two disjoint pools are made from the same lists: `split="train"` and `split="eval"` use
different statement templates, question templates, first names and surnames, so evaluation
measures facts phrased unlike anything seen in training.  bench/memory_e2e_bench.py has its own
generator with templates of its own; nothing here is shared with it.
"""
import random

FIRST = """Alice Bruno Chloe Dmitri Elena Farid Grace Hugo Ines Jonas Keiko Liam Maya Nikolai Olga
Pedro Quinn Rosa Samir Tara Ulrich Vera Walter Xenia Yusuf Zoe Arthur Beatrice Carlos Dora Emil
Fatima Gustav Hanna Ivan Julia Kofi Lena Marco Nadia Oscar Priya Rafael Sofia Tomas Uma Victor
Wanda Yara Zane Amara Bianca Cyrus Daria Esteban Freya Gideon Helga Idris Jasmine Kenji Lucia
Mateo Noor Otto Paloma Rohan Selma Teodor Ursula Vikram Willa Ximena Yannick Zofia Anders Brigid
Cosmo Delphine Ezra Flora Goran Hiroshi Ilse Jorge Katya Lorenzo Mirela Nils Odette Pavel
Rasmus Saoirse Tobias Valeria Wendell""".split()
LAST = """Abbott Baker Castillo Dunn Ellis Fischer Garcia Hale Iverson Jensen Kowalski Lambert
Moreau Novak Okafor Price Quint Reyes Schmidt Tanaka Underwood Vance Weber Young Zimmer Almeida
Brennan Costa Dubois Eriksen Ferreira Grant Horvath Ibarra Jovanovic Keller Lindqvist Mendez
Nakamura Oduya Petrov Ramos Sato Takahashi Ueda Vasquez Walsh Xu Yilmaz Zhang Andersen Bauer
Chen Delgado Engel Fontaine Gallo Haddad Ishikawa Jaworski Kim Laurent Marsh Nguyen Olsen
Pereira Quinlan Rossi Santos Thorne Varga Whitfield Yamada Zielinski Arslan Bianchi Caruso
Dimitrov Esposito Falk Gruber Holm Iqbal Janssen Kaur Lund Mbeki Nowak Ortega Pohl Ruiz
Sorensen Toivonen Vogel Wolff""".split()
ADJ = "red blue green silver old north small quiet east wooden golden broken upper hidden western narrow".split()
NOUN = ("door garden tower warehouse library cabinet harbor bridge station workshop vault office cellar "
        "lighthouse barn gallery project laboratory committee ship").split()
CITY = """Lisbon Oslo Nairobi Lima Osaka Krakow Dublin Porto Quito Hanoi Tunis Seville Bergen Graz
Leeds Perth Kyoto Lyon Turin Gdansk Riga Tallinn Bilbao Split Malaga Geneva Ghent Aarhus
Tampere Cork Salzburg Verona Bologna Utrecht Brno Plovdiv Tbilisi Izmir Fez Accra Dakar Cusco
Recife Cordoba Rosario Halifax Quebec Denver Boise Austin Tucson Dayton Mobile Fresno Omaha""".split()
MONTH = "January February March April May June July August September October November December".split()
COLOR = "amber crimson teal violet olive maroon indigo ivory coral navy scarlet bronze".split()
ANIMAL = "otter falcon badger lynx heron walrus gecko bison raven marmot ibis tapir".split()
LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"

# attribute -> (value kind, words used when it is stated, other words used when it is asked)
ATTRS = {
    "badge number": ("num", ["badge number"], ["badge number", "badge", "ID badge number"]),
    "parking space": ("num", ["parking space"], ["parking spot", "parking space number", "parking space"]),
    "pin code": ("num", ["pin code", "PIN"], ["PIN", "pin number", "pin code"]),
    "cabin number": ("num", ["cabin number"], ["cabin", "cabin number"]),
    "locker number": ("num", ["locker number"], ["locker", "locker number"]),
    "room number": ("num", ["room number"], ["room", "room number"]),
    "phone extension": ("num", ["phone extension"], ["extension", "phone extension", "extension number"]),
    "ticket number": ("num", ["ticket number"], ["ticket number", "ticket"]),
    "account number": ("num", ["account number"], ["account number", "account"]),
    "seat number": ("num", ["seat number"], ["seat", "seat number"]),
    "employee number": ("num", ["employee number", "staff number"], ["employee ID", "staff number", "employee number"]),
    "access code": ("code", ["access code"], ["access code", "entry code", "door code"]),
    "booking reference": ("code", ["booking reference"], ["booking code", "reservation code", "booking reference"]),
    "license plate": ("code", ["license plate"], ["number plate", "plate number", "license plate"]),
    "wifi password": ("code", ["wifi password"], ["wireless password", "wifi password", "network password"]),
    "serial code": ("code", ["serial code"], ["serial number", "serial code"]),
    "birthday": ("date", ["birthday"], ["date of birth", "birthday", "birth date"]),
    "appointment": ("date", ["appointment", "appointment date"], ["appointment date", "appointment"]),
    "delivery date": ("date", ["delivery date"], ["delivery date", "delivery day"]),
    "deadline": ("date", ["deadline"], ["due date", "deadline"]),
    "hometown": ("city", ["hometown"], ["home town", "hometown", "city of origin"]),
    "destination": ("city", ["destination"], ["travel destination", "destination city", "destination"]),
    "office location": ("city", ["office location", "office city"], ["office city", "office location"]),
    "birthplace": ("city", ["birthplace", "place of birth"], ["place of birth", "birthplace", "city of birth"]),
    "manager": ("name", ["manager"], ["boss", "manager", "supervisor"]),
    "doctor": ("name", ["doctor"], ["physician", "doctor"]),
    "landlord": ("name", ["landlord"], ["landlord", "landlady or landlord"]),
    "emergency contact": ("name", ["emergency contact"], ["emergency contact", "contact in case of emergency"]),
    "favourite colour": ("color", ["favourite colour", "favorite color"], ["favourite colour", "preferred colour", "favorite color"]),
    "code word": ("animal", ["code word", "password word"], ["code word", "secret word", "password word"]),
    "pet's name": ("name1", ["pet's name"], ["pet's name", "pet", "pet name"]),
}

# Statements: {e} entity, {a} attribute words, {v} value.  Split into train / eval templates.
STATEMENTS = [
    "Remember this: the {a} of {e} is {v}.",
    "The {a} of {e} is {v}.",
    "{e}'s {a} is {v}.",
    "Note that the {a} of {e} is {v}.",
    "For the record, the {a} for {e} is {v}.",
    "Log entry: the {a} for {e} was set to {v}.",
    "We recorded {v} as the {a} of {e}.",
    "{v} is the {a} of {e}.",
    "According to the file, {e}'s {a} is {v}.",
    "Update: {e} changed the {a} to {v}.",
    "The {a} for {e}: {v}.",
    "In case you need it later, the {a} of {e} is {v}.",
    "{e} mentioned that the {a} is {v}.",
    "It was confirmed today that {e} has {v} as the {a}.",
    "Important: {e} now uses {v} as the {a}.",
    "From the records: {a} of {e} = {v}.",
    # eval-only below this line
    "{e} told us that the {a} is {v}.",
    "After the meeting, {e} said the {a} would be {v}.",
    "Please keep in mind: {v} is what {e} gave as the {a}.",
    "Memo to all staff: the {a} belonging to {e} is {v}.",
]
N_TRAIN_STATEMENTS = 16

QUESTIONS = [
    "What is the {a} of {e}?",
    "What is {e}'s {a}?",
    "Which {a} does {e} have?",
    "Do you remember the {a} of {e}?",
    "Tell me {e}'s {a}.",
    "What {a} was recorded for {e}?",
    "Can you recall {e}'s {a}?",
    "I forgot the {a} of {e}. What is it?",
    "Remind me: what is the {a} for {e}?",
    "What was the {a} that {e} mentioned?",
    "{e} has a {a}. What is it?",
    "Look up the {a} of {e}, please.",
    # eval-only below this line
    "What did {e} say the {a} was?",
    "{e}'s {a}, what was it again?",
    "Which {a} belongs to {e}?",
    "Could you tell me what {a} {e} has?",
]
N_TRAIN_QUESTIONS = 12

# (prefix, suffix) around the question; the answer follows the suffix.
SCAFFOLDS = [("Question: ", "\nAnswer:"), ("Q: ", "\nA:"), ("User: ", "\nAssistant:"), ("", "\n")]


def _value(kind, rng):
    if kind == "num":
        nd = rng.randint(3, 6)
        return str(rng.randrange(10 ** (nd - 1), 10 ** nd))
    if kind == "code":
        n = rng.randint(2, 3)
        s = "".join(rng.choice(LETTERS) for _ in range(n)) + "-" + str(rng.randrange(10, 10000))
        return s
    if kind == "date":
        return "%s %d" % (rng.choice(MONTH), rng.randint(1, 28))
    if kind == "city":
        return rng.choice(CITY)
    if kind == "name":
        return "%s %s" % (rng.choice(FIRST), rng.choice(LAST))
    if kind == "name1":
        return rng.choice(FIRST)
    if kind == "color":
        return rng.choice(COLOR)
    if kind == "animal":
        return rng.choice(ANIMAL)
    raise ValueError(kind)


class FactMaker:
    """Makes facts of one split.  The eval split's names come from the last fifth of the name
    lists, the train split's from the rest, so no eval entity is seen in training."""

    def __init__(self, split, seed):
        assert split in ("train", "eval")
        self.rng = random.Random(seed)
        cut_f, cut_l = len(FIRST) * 4 // 5, len(LAST) * 4 // 5
        if split == "train":
            self.first, self.last = FIRST[:cut_f], LAST[:cut_l]
            self.stmts, self.qs = STATEMENTS[:N_TRAIN_STATEMENTS], QUESTIONS[:N_TRAIN_QUESTIONS]
        else:
            self.first, self.last = FIRST[cut_f:], LAST[cut_l:]
            self.stmts, self.qs = STATEMENTS[N_TRAIN_STATEMENTS:], QUESTIONS[N_TRAIN_QUESTIONS:]

    def entity(self):
        r = self.rng
        if r.random() < 0.8:
            return "%s %s" % (r.choice(self.first), r.choice(self.last))
        return "the %s %s" % (r.choice(ADJ), r.choice(NOUN))

    def make(self):
        """-> dict(statement, question, answer, entity, attribute, value)."""
        r = self.rng
        attr = r.choice(sorted(ATTRS))
        kind, say_words, ask_words = ATTRS[attr]
        e, v = self.entity(), _value(kind, r)
        stmt = r.choice(self.stmts).format(e=e, a=r.choice(say_words), v=v)
        q = r.choice(self.qs).format(e=e, a=r.choice(ask_words))
        q = q[0].upper() + q[1:]
        stmt = stmt[0].upper() + stmt[1:]
        pre, suf = SCAFFOLDS[0] if r.random() < 0.55 else r.choice(SCAFFOLDS)
        return dict(statement=stmt, question=pre + q + suf, answer=" " + v + ".", entity=e,
                    attribute=attr, value=v)


if __name__ == "__main__":
    for split in ("train", "eval"):
        fm = FactMaker(split, 1)
        for _ in range(4):
            f = fm.make()
            print(split, "|", f["statement"], "|", f["question"].replace("\n", "\\n"), "|", f["answer"])
