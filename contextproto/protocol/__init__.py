"""The context protocol engine: pure Python, no Django, no settings.

Everything here is a function of its inputs. The Django apps load rows, convert
them to the types in `messages`, call the engine and store what it returns.
"""
