from wander.cli import app

app()
