// Just enough of a DOM for the console's renderers in node: elements with
// children, attributes and textContent. Setting innerHTML or outerHTML is
// counted (the renderers must never do it).
class FakeNode {
  constructor(doc) {
    this.doc = doc;
    this.children = [];
  }
  appendChild(n) {
    this.children.push(n);
    return n;
  }
  get textContent() {
    return this.children.map((c) => c.textContent).join('');
  }
  set textContent(v) {
    this.children = [new FakeText(this.doc, String(v))];
  }
  findAll(tag) {
    const out = [];
    for (const c of this.children) {
      if (c.tagName === tag.toUpperCase()) out.push(c);
      if (c.findAll) out.push(...c.findAll(tag));
    }
    return out;
  }
}

class FakeText {
  constructor(doc, text) {
    this.doc = doc;
    this.text = text;
  }
  get textContent() {
    return this.text;
  }
}

class FakeElement extends FakeNode {
  constructor(doc, tag) {
    super(doc);
    this.tagName = tag.toUpperCase();
    this.attributes = {};
    this.className = '';
  }
  setAttribute(k, v) {
    this.attributes[k] = String(v);
  }
  getAttribute(k) {
    return k in this.attributes ? this.attributes[k] : null;
  }
  set innerHTML(v) {
    this.doc.htmlAssignments++;
  }
  set outerHTML(v) {
    this.doc.htmlAssignments++;
  }
}

export class FakeDocument {
  constructor() {
    this.htmlAssignments = 0;
  }
  createElement(tag) {
    return new FakeElement(this, tag);
  }
  createTextNode(text) {
    return new FakeText(this, text);
  }
}
