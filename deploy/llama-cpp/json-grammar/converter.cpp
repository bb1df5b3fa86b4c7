// A CPython module over llama.cpp's JSON schema to GBNF converter, compiled from the sdist's
// common/ sources (setup.py): the grammar llama-server builds for a schema, here too.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "json-schema-to-grammar.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

// common.h declares these three and common.cpp defines them along with much that needs
// libllama; the converter uses only these, written here.
std::string string_join(const std::vector<std::string> & values, const std::string & separator) {
    std::string joined;
    for (size_t i = 0; i < values.size(); ++i) {
        joined += (i ? separator : "") + values[i];
    }
    return joined;
}

std::vector<std::string> string_split(const std::string & str, const std::string & delimiter) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t end; (end = str.find(delimiter, start)) != std::string::npos; start = end + delimiter.size()) {
        parts.push_back(str.substr(start, end - start));
    }
    parts.push_back(str.substr(start));
    return parts;
}

std::string string_repeat(const std::string & str, size_t n) {
    std::string repeated;
    repeated.reserve(str.size() * n);
    for (size_t i = 0; i < n; ++i) {
        repeated += str;
    }
    return repeated;
}

// json.cpp's assertions call ggml's; -Bsymbolic keeps this one for this module alone.
extern "C" void ggml_abort(const char * file, int line, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, args);
    va_end(args);
    abort();
}

static PyObject * schema_to_grammar(PyObject *, PyObject * args) {
    const char * schema = nullptr;
    if (!PyArg_ParseTuple(args, "s", &schema)) {
        return nullptr;
    }
    try {
        // force_gbnf: GBNF whatever the build (llguidance is not compiled in here anyway).
        std::string grammar = json_schema_to_grammar(common_json::parse(schema), true);
        return PyUnicode_FromStringAndSize(grammar.data(), (Py_ssize_t) grammar.size());
    } catch (const std::exception & e) {
        PyErr_SetString(PyExc_ValueError, e.what());
        return nullptr;
    }
}

static PyObject * schema_rules(PyObject *, PyObject * args) {
    PyObject * names = nullptr;
    PyObject * schemas = nullptr;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &names, &PyList_Type, &schemas)) {
        return nullptr;
    }
    if (PyList_Size(names) != PyList_Size(schemas)) {
        PyErr_SetString(PyExc_ValueError, "as many names as schemas");
        return nullptr;
    }
    std::vector<std::string> rule_names;
    std::vector<std::string> texts;
    for (Py_ssize_t i = 0; i < PyList_Size(names); ++i) {
        const char * name = PyUnicode_AsUTF8(PyList_GetItem(names, i));
        const char * text = name ? PyUnicode_AsUTF8(PyList_GetItem(schemas, i)) : nullptr;
        if (!text) {
            return nullptr;
        }
        rule_names.emplace_back(name);
        texts.emplace_back(text);
    }
    try {
        // As llama-server's chat formats build a tool's arguments: one converter, a rule each.
        std::vector<common_chat_schema_document> documents;  // alive until the grammar is written
        for (const auto & text : texts) {
            documents.push_back(common_chat_schema_from_json(common_json::parse(text)));
        }
        std::string rules = build_grammar([&](const common_grammar_builder & builder) {
            for (size_t i = 0; i < documents.size(); ++i) {
                // A primitive schema is answered with the primitive's rule (`string`): named too,
                // as llama-server's formats use the name add_schema returns in their own rules.
                std::string rule = builder.add_schema(rule_names[i], *documents[i].root);
                if (rule != rule_names[i]) {
                    builder.add_rule(rule_names[i], rule);
                }
            }
        });
        return PyUnicode_FromStringAndSize(rules.data(), (Py_ssize_t) rules.size());
    } catch (const std::exception & e) {
        PyErr_SetString(PyExc_ValueError, e.what());
        return nullptr;
    }
}

static PyMethodDef methods[] = {
    {"schema_to_grammar", schema_to_grammar, METH_VARARGS, "GBNF for JSON valid against a JSON schema text."},
    {"schema_rules", schema_rules, METH_VARARGS, "GBNF rules named after each name, for its schema text."},
    {nullptr, nullptr, 0, nullptr},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_converter", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__converter(void) {
    return PyModule_Create(&module);
}
